#include "engine/cuda/omitted_launches.h"

namespace gemma::cuda {

absl::StatusOr<OmittedLaunches> ParseOmittedLaunches(std::string_view list) {
  OmittedLaunches o;
  if (list.empty()) return o;
  size_t begin = 0;
  while (true) {
    const size_t comma = list.find(',', begin);
    const std::string_view name = list.substr(begin, comma == std::string_view::npos ? list.npos : comma - begin);
    if (name == "norms") {
      o.norms = true;
    } else if (name == "qkv-rope") {
      o.qkv_rope = true;
    } else if (name == "attention") {
      o.attention = true;
    } else if (name == "linears") {
      o.linears = true;
    } else {
      return absl::InvalidArgumentError("--omit: unknown launch kind '" + std::string(name) +
                                        "' (norms, qkv-rope, attention, linears)");
    }
    if (comma == std::string_view::npos) return o;
    begin = comma + 1;
  }
}

std::string OmittedLaunchesName(const OmittedLaunches& o) {
  std::string names;
  auto add = [&names](bool on, const char* name) {
    if (!on) return;
    if (!names.empty()) names += ',';
    names += name;
  };
  add(o.norms, "norms");
  add(o.qkv_rope, "qkv-rope");
  add(o.attention, "attention");
  add(o.linears, "linears");
  return names.empty() ? "none" : names;
}

}  // namespace gemma::cuda

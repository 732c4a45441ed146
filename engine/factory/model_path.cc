#include "engine/factory/model_path.h"

#include <cstdlib>
#include <filesystem>

namespace gemma {

std::string DefaultModelDir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("GEMMA_MODEL_DIR"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path candidates[] = {
      exe.parent_path() / "../../models/gemma4-fortunes",
      exe.parent_path() / "../share/gemma-serve/models/gemma4-fortunes",
      fs::path(GEMMA_SOURCE_DIR) / "models/gemma4-fortunes",
  };
  for (const fs::path& p : candidates) {
    if (!ec && fs::exists(p / "config.json", ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "";
}

}  // namespace gemma

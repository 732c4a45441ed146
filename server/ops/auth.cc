#include "server/ops/auth.h"

#include <fstream>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace gemma::server::ops {
namespace {

constexpr std::string_view kBearer = "bearer";

// The credentials of an `authorization` value in the Bearer scheme, whose
// name is case-insensitive (RFC 6750 section 2.1, RFC 7235 section 2.1);
// nullopt for another scheme.
std::optional<std::string_view> BearerCredentials(std::string_view header) {
  if (header.size() <= kBearer.size() || header[kBearer.size()] != ' ' ||
      !absl::EqualsIgnoreCase(absl::string_view(header.data(), kBearer.size()),
                              absl::string_view(kBearer.data(), kBearer.size()))) {
    return std::nullopt;
  }
  header.remove_prefix(kBearer.size());
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  return header;
}

// Compares in time independent of where the strings differ, so a caller
// cannot find a key byte by byte from response times.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Every key is compared, so the time does not tell which one matched.
bool IsAmong(std::string_view key, const std::vector<std::string>& keys) {
  bool known = false;
  for (const std::string& k : keys) known |= ConstantTimeEquals(k, key);
  return known;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> LoadApiKeys(const std::vector<std::string>& flag_keys,
                                                     const std::string& key_file) {
  std::vector<std::string> keys;
  for (const std::string& key : flag_keys) {
    const std::string trimmed(absl::StripAsciiWhitespace(key));
    if (trimmed.empty()) return absl::InvalidArgumentError("--api-key: a key must not be empty");
    keys.push_back(trimmed);
  }
  if (key_file.empty()) return keys;
  std::ifstream in(key_file);
  if (!in)
    return absl::InvalidArgumentError(absl::StrCat("--api-key-file: cannot read '", key_file, "'"));
  std::string line;
  const size_t from_flags = keys.size();
  while (std::getline(in, line)) {
    const std::string trimmed(absl::StripAsciiWhitespace(line));
    if (trimmed.empty() || trimmed.front() == '#') continue;
    keys.push_back(trimmed);
  }
  if (keys.size() == from_flags) {
    return absl::InvalidArgumentError(
        absl::StrCat("--api-key-file: '", key_file, "' holds no key"));
  }
  return keys;
}

bool IsAuthorizedBearer(std::string_view authorization, const std::vector<std::string>& keys) {
  const std::optional<std::string_view> key = BearerCredentials(authorization);
  return key.has_value() && IsAmong(*key, keys);
}

bool ApiKeyChecker::IsKnownKey(std::string_view key) const { return IsAmong(key, keys_); }

grpc::Status ApiKeyChecker::Check(const grpc::ServerContextBase& context) const {
  if (keys_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  std::string_view header;
  if (it != metadata.end()) header = std::string_view(it->second.data(), it->second.size());
  std::string reason;
  if (it == metadata.end()) {
    reason = "missing 'authorization: Bearer <key>' metadata";
  } else if (!BearerCredentials(header)) {
    reason = "the authorization metadata is not 'Bearer <key>'";
  } else if (!IsKnownKey(*BearerCredentials(header))) {
    reason = "unknown API key";
  } else {
    return grpc::Status::OK;
  }
  spdlog::info("unauthenticated call from {}: {}", context.peer(), reason);
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, reason);
}

}  // namespace gemma::server::ops

#include "server/ops/json_log.h"

#include <grpc/support/log.h>

#include <chrono>
#include <ctime>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace gemma::server::ops {
namespace {

std::string Timestamp(std::chrono::system_clock::time_point time) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:06d}Z", date, static_cast<int>(micros % 1000000));
}

}  // namespace

std::string_view RequestIdOf(std::string_view message) {
  constexpr std::string_view kPrefix = "request ";
  if (message.substr(0, kPrefix.size()) != kPrefix) return {};
  message.remove_prefix(kPrefix.size());
  const size_t end = message.find(' ');
  const std::string_view id = message.substr(0, end);
  // "-" marks a refusal before an id was known.
  return id == "-" ? std::string_view() : id;
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const std::string_view text(msg.payload.data(), msg.payload.size());
  nlohmann::ordered_json line;
  line["ts"] = Timestamp(msg.time);
  const auto level = spdlog::level::to_string_view(msg.level);
  line["level"] = std::string(level.data(), level.size());
  line["msg"] = std::string(text);
  if (const std::string_view id = RequestIdOf(text); !id.empty()) {
    line["request_id"] = std::string(id);
  }
  // Caller text can reach a message (an id, a path): never throw on bad UTF-8.
  const std::string json = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  dest.append(json.data(), json.data() + json.size());
  dest.push_back('\n');
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

namespace {

// gRPC's own log lines (e.g. a failed TLS handshake) through spdlog, so that
// with --log-format json every line of the process is JSON.
void GrpcToSpdlog(gpr_log_func_args* args) {
  const spdlog::level::level_enum level =
      args->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::err
      : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                : spdlog::level::debug;
  spdlog::log(level, "grpc {}:{}: {}", args->file, args->line, args->message);
}

}  // namespace

void SetLogFormat(const std::string& format) {
  if (format == "json") {
    spdlog::set_formatter(std::make_unique<JsonLogFormatter>());
    gpr_set_log_function(GrpcToSpdlog);
  } else {
    spdlog::set_pattern("%+");
  }
}

}  // namespace gemma::server::ops

// --log-format json: every log line becomes one JSON object,
//   {"ts":"2026-11-30T02:18:11.123456Z","level":"info","msg":"...","request_id":"req-1"}
// request_id is present on lines about one request. The server's convention
// is that such lines start with "request <id> " (the one-line summaries,
// rejections, timeouts), so the formatter takes the id from there and every
// existing log call gets it without threading an id through.
//
// Thread-safety: spdlog clones the formatter per sink; each copy is used
// under the sink's lock.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "spdlog/formatter.h"

namespace gemma::server::ops {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

// The id in a message "request <id> ...", or "" when it is not one.
std::string_view RequestIdOf(std::string_view message);

// Installs the formatter for `format` ("text": spdlog's default pattern,
// "json": JsonLogFormatter) on the default logger.
void SetLogFormat(const std::string& format);

}  // namespace gemma::server::ops

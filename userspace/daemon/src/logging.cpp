// SPDX-License-Identifier: Apache-2.0
// Logging: spdlog on stderr, text or JSON lines ({"ts","level","logger","msg"}).
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>

#include "colod/daemon/daemon.h"

namespace colod::daemon {

namespace {

class JsonSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        msg.time.time_since_epoch())
                        .count();
    const time_t secs = static_cast<time_t>(us / 1000000);
    tm utc{};
    gmtime_r(&secs, &utc);
    char ts[64];
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                  static_cast<long>(us % 1000000));
    nlohmann::json j = {
        {"ts", ts},
        {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size())},
        {"logger", std::string(msg.logger_name.data(), msg.logger_name.size())},
        {"msg", std::string(msg.payload.data(), msg.payload.size())}};
    const std::string line =
        j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

}  // namespace

void setupLogging(LogFormat format, const std::string& level) {
  std::shared_ptr<spdlog::logger> logger;
  if (format == LogFormat::Json) {
    logger = std::make_shared<spdlog::logger>("colod", std::make_shared<JsonSink>());
  } else {
    logger = std::make_shared<spdlog::logger>(
        "colod", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%f %^%l%$ %v");
  }
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);
  spdlog::drop("colod");
  spdlog::register_logger(logger);
  spdlog::set_default_logger(logger);
}

}  // namespace colod::daemon

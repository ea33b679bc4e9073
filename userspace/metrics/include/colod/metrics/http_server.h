// SPDX-License-Identifier: Apache-2.0
// A minimal HTTP server for /metrics, /healthz and /readyz on cpp-httplib, one worker thread.
//
// The metrics callback is called on the server thread for each GET /metrics; it must
// be thread-safe with respect to the daemon (the daemon hands it a mutex-guarded snapshot).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "colod/base/result.h"
#include "colod/metrics/prom_text.h"

namespace httplib {
class Server;
}

namespace colod::metrics {

struct ListenAddress {
  std::string host;
  int port = 0;
};

// Parses "host:port", "[v6]:port" or ":port" (host defaults to 127.0.0.1). EINVAL on bad input.
Result<ListenAddress> parseListenAddress(std::string_view text);

// A probe's answer: 200 with `why` when ok, else 503 with `why`.
struct ProbeResult {
  bool ok = true;
  std::string why;
};

struct HttpHandlers {
  // GET /metrics: writes the document into the writer, whose every piece goes out as an HTTP/1.1
  // chunk (the server finishes it). The document is never whole in memory: 2.6 MB at 1000
  // containers, and built whole, with httplib's copy of it, it stayed resident (session 47).
  // Unset: an empty document.
  std::function<void(TextWriter&)> metrics;
  // GET /healthz (liveness: the daemon's loop is turning) and GET /readyz (readiness: the BPF
  // programs are attached and the runtime is synchronized, or colod was told not to act). Unset
  // = always ok. Called on the server thread: thread-safe, quick.
  std::function<ProbeResult()> live;
  std::function<ProbeResult()> ready;
};

class HttpServer {
 public:
  // Binds (EADDRINUSE/EACCES/EADDRNOTAVAIL from the bind as errors) and starts serving.
  // A port of 0 picks a free port; see port().
  static Result<std::unique_ptr<HttpServer>> start(const ListenAddress& address,
                                                   HttpHandlers handlers);
  static Result<std::unique_ptr<HttpServer>> start(const ListenAddress& address,
                                                   std::function<void(TextWriter&)> metrics) {
    return start(address, HttpHandlers{.metrics = std::move(metrics), .live = {}, .ready = {}});
  }
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  HttpServer(HttpServer&&) = delete;
  HttpServer& operator=(HttpServer&&) = delete;

  [[nodiscard]] int port() const { return port_; }
  // Stops accepting and joins the server thread. Idempotent.
  void stop();

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace colod::metrics

// SPDX-License-Identifier: Apache-2.0
#include "colod/metrics/http_server.h"

#include <httplib.h>

#include <cerrno>
#include <charconv>
#include <chrono>

#include <sys/socket.h>

namespace colod::metrics {

Result<ListenAddress> parseListenAddress(std::string_view text) {
  ListenAddress out;
  std::string_view port_text;
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return COLOD_ERR(EINVAL, "listen address '", text, "': expected [ipv6]:port");
    }
    out.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return COLOD_ERR(EINVAL, "listen address '", text, "': expected host:port");
    }
    out.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) {
    out.host = "127.0.0.1";
  }
  int port = -1;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 ||
      port > 65535) {
    return COLOD_ERR(EINVAL, "listen address '", text, "': bad port '", port_text, "'");
  }
  out.port = port;
  return out;
}

namespace {

// The provider httplib calls for a chunked reply: the whole document in one call, each piece of
// the writer a chunk. A scraper gone mid-document: the rest is formatted and dropped (the reply
// ends without its last chunk, so no client takes a part for the whole).
httplib::ContentProviderWithoutLength chunkedDocument(
    const std::function<void(TextWriter&)>& metrics) {
  return [metrics](size_t /*offset*/, httplib::DataSink& sink) {
    bool open = true;
    TextWriter w(
        [&](std::string_view piece) { open = open && sink.write(piece.data(), piece.size()); });
    if (metrics) {
      metrics(w);
    }
    w.finish();
    if (open) {
      sink.done();
    }
    return open;
  };
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::start(const ListenAddress& address,
                                                      HttpHandlers handlers) {
  std::unique_ptr<HttpServer> self(new HttpServer());
  self->server_ = std::make_unique<httplib::Server>();
  auto& srv = *self->server_;
  // One worker: scrapes are rare and small; the default pool would cost ~8 threads of stack.
  srv.new_task_queue = [] { return new httplib::ThreadPool(1); };
  // httplib's default sets SO_REUSEPORT, which would let a second colod bind the same port
  // silently; SO_REUSEADDR alone keeps restarts fast and makes a conflict an error.
  srv.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  srv.set_keep_alive_max_count(4);
  srv.set_read_timeout(5, 0);
  srv.set_write_timeout(5, 0);
  srv.Get("/metrics", [metrics = std::move(handlers.metrics)](const httplib::Request& /*req*/,
                                                              httplib::Response& res) {
    res.set_chunked_content_provider("text/plain; version=0.0.4; charset=utf-8",
                                     chunkedDocument(metrics));
  });
  auto probe = [](std::function<ProbeResult()> check) {
    return [check = std::move(check)](const httplib::Request& /*req*/, httplib::Response& res) {
      const ProbeResult r = check ? check() : ProbeResult{};
      res.status = r.ok ? 200 : 503;
      res.set_content((r.ok ? "ok" : "not ok") + (r.why.empty() ? "" : ": " + r.why) + "\n",
                      "text/plain");
    };
  };
  srv.Get("/healthz", probe(std::move(handlers.live)));
  srv.Get("/readyz", probe(std::move(handlers.ready)));
  errno = 0;
  int port = 0;
  if (address.port == 0) {
    port = srv.bind_to_any_port(address.host);
  } else {
    port = srv.bind_to_port(address.host, address.port) ? address.port : -1;
  }
  if (port < 0) {
    const int err = errno != 0 ? errno : EADDRNOTAVAIL;
    return COLOD_ERR(err, "binding metrics server to ", address.host, ":", address.port);
  }
  self->port_ = port;
  self->thread_ = std::thread([&srv] { srv.listen_after_bind(); });
  // httplib's stop() is a no-op until the accept loop runs: wait for it (bounded) so that an
  // early stop() cannot leave the thread listening forever.
  for (int i = 0; i < 5000 && !srv.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!srv.is_running()) {
    srv.stop();
    self->thread_.detach();
    return COLOD_ERR(ETIMEDOUT, "metrics server thread did not start");
  }
  return self;
}

void HttpServer::stop() {
  if (server_) {
    server_->stop();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

HttpServer::~HttpServer() { stop(); }

}  // namespace colod::metrics

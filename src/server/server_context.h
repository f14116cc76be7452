// What every request handler shares: the model, the step loop, metrics and
// the server's options. Built once by HttpServer; handlers only read it.
#pragma once

#include <cstdint>
#include <string>

#include "engine/model_bundle.h"
#include "server/metrics.h"
#include "server/prompt_builder.h"
#include "server/requests.h"
#include "server/step_loop.h"

namespace g4::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port
  std::string api_key;               // empty: no authentication
  std::string model_id = "g4";       // what /v1/models lists and responses name
  size_t max_body_bytes = 8u << 20;
  int max_queue = 64;                // requests waiting beyond those running; more get 429
  int threads = 0;                   // HTTP worker threads; 0: enough for max_seqs + max_queue
  int timeout_seconds = 30;          // socket read/write timeout (slow or half-open clients)
  int keep_alive_seconds = 5;
  ServingLimits limits;
  RequestLimits request_limits;
};

struct ServerContext {
  const ServerOptions& options;
  const ModelBundle& bundle;
  StepLoop& loop;
  Metrics& metrics;
  int max_seqs = 1;
  int64_t created = 0;  // unix time the server started (/v1/models)
};

}  // namespace g4::server

// The endpoint handlers. Each reads the request, answers errors in its
// API's shape, and otherwise runs jobs through job_response.h.
#pragma once

#include "server/api_error.h"
#include "server/server_context.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace g4::server {

// Writes `error` as the response (status and JSON body).
void RespondError(httplib::Response& res, const ApiError& error, ApiFlavor flavor);

// OpenAI (openai_handlers.cc).
void HandleChatCompletions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void HandleCompletions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void HandleModels(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void HandleModel(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

// Anthropic (anthropic_handlers.cc).
void HandleMessages(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void HandleCountTokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace g4::server

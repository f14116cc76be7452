// sse_replay: writes the response the server would send for a given model
// output, so tests/server/js/replay.test.mjs can feed it to the official
// SDKs (tool calls and reasoning, which the demo model never writes).
//
//   sse_replay openai|anthropic stream|whole TOOLS(0|1) < model_output.txt
//
// The output is encoded with the demo model's tokenizer and decoded back one
// token at a time (as the sinks do), each piece going through the same
// OutputParser and writer as a live response.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>

#include "server/anthropic_writer.h"
#include "server/openai_writer.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  using namespace g4;
  using namespace g4::server;
  if (argc != 4) {
    std::fprintf(stderr, "usage: sse_replay openai|anthropic stream|whole 0|1 < output\n");
    return 2;
  }
  const std::string api = argv[1];
  const bool stream = std::string(argv[2]) == "stream";
  const bool tools = std::string(argv[3]) == "1";
  const std::string output((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const std::string dir = (std::filesystem::path(G4_SOURCE_DIR) / "models/demo").string();
  auto tok = Tokenizer::Load(dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  auto ids = tok->Encode(output);
  if (!ids.ok()) return 1;
  StreamDecoder decoder(*tok);
  OutputParser parser(tools);
  std::string body;
  const int n = static_cast<int>(ids->size());
  if (api == "openai") {
    ChatWriter w(*tok, "demo", 1, stream, stream, false);
    body += w.Start();
    for (int32_t id : *ids) body += w.Events(0, parser.Push(decoder.Push(id)), {});
    body += w.Events(0, parser.Push(decoder.Finish()), {});
    body += w.Events(0, parser.Finish(), {});
    body += w.Finish(0, "stop");
    body += w.End({10, n, 0});
  } else {
    MessagesWriter w("demo", stream, 10, 0);
    body += w.Start();
    for (int32_t id : *ids) body += w.Events(parser.Push(decoder.Push(id)));
    body += w.Events(parser.Push(decoder.Finish()));
    body += w.Events(parser.Finish());
    body += w.Finish("stop", "", n);
  }
  std::fwrite(body.data(), 1, body.size(), stdout);
  return 0;
}

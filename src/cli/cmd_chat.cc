// g4 chat -m MODEL: an interactive terminal chat. Answers stream to stdout
// as they are generated; the banner, prompts, notices and a one-line stats
// footer after each answer go to stderr. The conversation's KV cache is
// reused from turn to turn and can be saved and restored (/save, /load).
// Line editing and history come from cli/line_editor.h. Ctrl-C stops the
// current answer (or drops the line being typed) and keeps the chat; Ctrl-D
// on an empty line, /exit, /quit or /bye quits.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>

#include "cli/chat_session.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/generate_job.h"
#include "cli/line_editor.h"
#include "cli/prefill.h"
#include "cli/progress.h"
#include "cli/sampling_flags.h"
#include "cli/session_file.h"
#include "engine/generator.h"

namespace g4::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted.store(true); }

struct ChatFlags {
  CommonFlags common;
  std::string system, history_file;
  bool think = false, no_history = false;
  int64_t ctx = 0;
  SamplingFlags sampling;
  EngineFlags engine;
};

void Note(const std::string& text) { std::fprintf(stderr, "%s\n", text.c_str()); }

void PrintHelp() {
  Note("  /reset            start a new conversation\n"
       "  /system TEXT      set the system prompt (and start over)\n"
       "  /think on|off     let the model think before answering\n"
       "  /save FILE        save the conversation with its KV cache (.g4kv)\n"
       "  /load FILE        continue a saved conversation\n"
       "  /exit /quit /bye  quit (as does Ctrl-D on an empty line)\n"
       "  A line ending in \\ continues on the next; \"\"\" on its own line starts and ends a block.\n"
       "  Ctrl-C stops an answer; arrows, Ctrl-R and the other emacs keys edit; history is kept.");
}

class Chat {
 public:
  Chat(const ChatFlags& f, ModelBundle& bundle, Engine& engine, std::string model_dir)
      : f_(f), bundle_(bundle), engine_(engine), model_dir_(std::move(model_dir)), gen_(engine, *bundle.tokenizer) {
    conv_.system = f.system;
    conv_.think = f.think;
  }

  Status Init() {
    G4_ASSIGN_OR_RETURN(base_sampling_, ResolveSampling(f_.sampling, bundle_));
    Verbose(f_.common, "sampling: " + DescribeSampling(base_sampling_) + " (+1 per turn), max_tokens " +
                           std::to_string(f_.sampling.max_tokens) + ", kv " + f_.engine.kv + ", context " +
                           std::to_string(ContextSize(f_.ctx, bundle_)));
    return Status::Ok();
  }

  // Reads a message (continuation lines and """ blocks joined); false at
  // the end of input.
  bool ReadMessage(LineEditor& editor, std::string* message) {
    message->clear();
    std::string line;
    bool block = false;
    while (true) {
      const char* prompt = message->empty() && !block ? "> " : "... ";
      const LineEditor::Result r = editor.Read(editor.interactive() ? prompt : "", &line);
      if (r == LineEditor::Result::kEof) {
        if (editor.interactive()) Note("");
        return false;
      }
      if (r == LineEditor::Result::kInterrupted) {
        g_interrupted.store(false);
        Note("^C");
        message->clear();
        block = false;
        continue;
      }
      if (line == "\"\"\"") {
        if (block) return true;
        block = true;
        continue;
      }
      if (block) {
        *message += line + "\n";
        continue;
      }
      if (!line.empty() && line.back() == '\\') {
        line.pop_back();
        *message += line + "\n";
        continue;
      }
      *message += line;
      return true;
    }
  }

  // Runs a command line ("/..."); false to quit.
  bool Command(const std::string& line) {
    const size_t space = line.find(' ');
    const std::string cmd = line.substr(0, space);
    const std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
    if (cmd == "/exit" || cmd == "/quit" || cmd == "/bye") return false;
    if (cmd == "/help" || cmd == "/?") {
      PrintHelp();
    } else if (cmd == "/reset" || cmd == "/clear") {
      conv_.Clear();
      gen_.Reset();
      Note("[conversation cleared]");
    } else if (cmd == "/system") {
      conv_.system = arg;
      conv_.Clear();
      gen_.Reset();
      Note(std::string("[system prompt ") + (arg.empty() ? "removed" : "set") + "; conversation cleared]");
    } else if (line == "/think on" || line == "/think off") {
      conv_.think = line == "/think on";
      Note(std::string("[thinking ") + (conv_.think ? "on" : "off") + "]");
    } else if (cmd == "/save" && !arg.empty()) {
      Status s = SaveSession(arg, engine_, gen_, Identity());
      Note(s.ok() ? "[saved " + std::to_string(gen_.cached_tokens().size()) + " tokens to " + arg + "]"
                  : "[not saved: " + EscapeForTerminal(s.ToString()) + "]");
    } else if (cmd == "/load" && !arg.empty()) {
      Load(arg);
    } else if (cmd == "/save" || cmd == "/load") {
      Note("[" + cmd + " needs a file name: " + cmd + " FILE]");
    } else {
      Note("[unknown command " + line + "; /help lists them]");
    }
    return true;
  }

  void Turn(const std::string& message) {
    conv_.turns.push_back(TextMessage("user", message));
    const Status s = Answer();
    if (!s.ok()) {
      conv_.turns.pop_back();
      Note("[error: " + EscapeForTerminal(s.ToString()) + "]");
    }
  }

 private:
  const KvFileIdentity& Identity() {
    if (identity_.model_fingerprint.empty()) identity_ = SessionIdentity(bundle_, model_dir_);
    return identity_;
  }

  void Load(const std::string& path) {
    StatusOr<LoadedKv> loaded = LoadSession(path, engine_, Identity());
    if (!loaded.ok()) {
      Note("[not loaded: " + EscapeForTerminal(loaded.status().ToString()) + "]");
      return;
    }
    StatusOr<Conversation> conv = ParseConversation(bundle_.tokenizer->Decode(loaded->tokens));
    if (!conv.ok()) {
      Note("[not loaded: " + EscapeForTerminal(path + " is " + conv.status().message()) + "]");
      return;
    }
    conv_ = std::move(*conv);
    const size_t n = loaded->tokens.size();
    gen_.Adopt(std::move(loaded->seq), std::move(loaded->tokens));
    Note("[loaded " + std::to_string(conv_.turns.size()) + " turns, " + std::to_string(n) + " tokens from " + path +
         "]");
  }

  Status Answer() {
    G4_ASSIGN_OR_RETURN(std::string rendered, conv_.Render(bundle_.empty_thought_channel));
    G4_ASSIGN_OR_RETURN(std::vector<int32_t> ids, bundle_.tokenizer->Encode(rendered));
    GenerateOptions options;
    options.max_tokens = f_.sampling.max_tokens;
    const Status fits = FitContext(f_.ctx, bundle_, ids.size(), &options.max_tokens);
    if (!fits.ok()) return OutOfRange("[chat] the conversation is " + std::to_string(ids.size()) +
                                      " tokens, past the context (" + std::to_string(ContextSize(f_.ctx, bundle_)) +
                                      "): /reset starts over, -c sets a larger one");
    options.sampling = base_sampling_;
    options.sampling.seed = *base_sampling_.seed + turn_++;
    options.stop_strings = f_.sampling.stop;
    options.stop_ids = bundle_.ChatStopIds();
    g_interrupted.store(false);
    G4_ASSIGN_OR_RETURN(PrefillStats pre, Prefill(gen_, ids, 4 * f_.engine.chunk, !f_.common.quiet));
    auto stream = [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
    G4_ASSIGN_OR_RETURN(GenerateResult r, gen_.Generate(ids, options, stream, &g_interrupted));
    std::fflush(stdout);
    // The notices end the answer's line on a terminal (stdout and stderr
    // interleave there); when stdout goes elsewhere they get their own.
    const char* notice = r.finish_reason == "cancelled" ? " [stopped]"
                         : r.finish_reason == "length"  ? " [length]"
                                                        : nullptr;
    if (r.finish_reason == "cancelled") g_interrupted.store(false);
    if (notice) std::fprintf(stderr, "%s%s", notice, ::isatty(STDOUT_FILENO) ? "" : "\n");
    std::fputc('\n', stdout);
    std::fflush(stdout);
    conv_.turns.push_back(TextMessage("assistant", SplitReasoning(r.text).answer));
    if (!f_.common.quiet) {
      const double ttft = pre.seconds + r.prefill_seconds;
      const double tps = r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0;
      const int64_t ctx = ContextSize(f_.ctx, bundle_);
      const bool tty = StderrIsTerminal();
      std::fprintf(stderr, "%s[%zu tokens, %.1f tok/s | prompt %lld new + %lld cached, %.0f ms to first token | "
                           "context %zu/%lld | %s]%s\n",
                   tty ? "\033[2m" : "", r.tokens.size(), tps, static_cast<long long>(ids.size() - pre.reused),
                   static_cast<long long>(pre.reused), ttft * 1000, gen_.cached_tokens().size(),
                   static_cast<long long>(ctx), r.finish_reason.c_str(), tty ? "\033[0m" : "");
    }
    return Status::Ok();
  }

  const ChatFlags& f_;
  ModelBundle& bundle_;
  Engine& engine_;
  std::string model_dir_;
  Generator gen_;
  Conversation conv_;
  SamplingParams base_sampling_;
  uint64_t turn_ = 0;
  KvFileIdentity identity_;
};

Status ChatLoop(const ChatFlags& f) {
  std::string model_dir;
  G4_ASSIGN_OR_RETURN(std::unique_ptr<ModelBundle> bundle, LoadBundle(f.common, f.engine.backend, &model_dir));
  EngineFlags ef = f.engine;
  ef.max_seqs = 1;
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*bundle->model, ToEngineOptions(ef)));
  Chat chat(f, *bundle, *engine, model_dir);
  G4_RETURN_IF_ERROR(chat.Init());
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read returns EINTR
  sigaction(SIGINT, &sa, nullptr);

  const std::string history = f.no_history ? "" : (f.history_file.empty() ? DefaultHistoryPath() : f.history_file);
  std::unique_ptr<LineEditor> editor = LineEditor::Create(history, &g_interrupted);
  if (!f.common.quiet)
    std::fprintf(stderr, "g4 chat: %s (loaded in %.2f s). /help for commands, /exit or Ctrl-D to quit.\n",
                 f.common.model.c_str(), bundle->load_seconds);
  if (editor->interactive()) Verbose(f.common, "history " + (history.empty() ? std::string("off") : history));
  std::string message;
  while (chat.ReadMessage(*editor, &message)) {
    if (message.find_first_not_of(" \t\n") == std::string::npos) continue;
    editor->AddHistory(message);
    if (message[0] == '/' && message.find('\n') == std::string::npos) {
      if (!chat.Command(message)) break;
      continue;
    }
    chat.Turn(message);
  }
  return Status::Ok();
}

}  // namespace

int RunChat(int argc, char** argv) {
  CLI::App app{"Chat with a model in the terminal", "g4 chat"};
  ChatFlags f;
  std::string positional_model;
  app.add_option("MODEL", positional_model, "the model (same as -m)");
  AddCommonFlags(app, f.common, kModelFlag | kThreadsFlag);
  app.add_option("--system", f.system, "system prompt");
  app.add_flag("--think", f.think, "start with thinking on");
  AddContextFlag(app, f.ctx,
                 "context size: tokens the conversation may hold (default 0: the model's max_position_embeddings)");
  app.add_option("--history-file", f.history_file,
                 "where typed lines are kept (default: $XDG_STATE_HOME/g4/history or ~/.local/state/g4/history)");
  app.add_flag("--no-history", f.no_history, "keep no history file");
  AddSamplingFlags(app, f.sampling);
  AddEngineFlags(app, f.engine, "plain:bf16");
  if (auto code = ParseCommandLine(app, "chat", argc, argv)) return *code;
  Status s = FinishCommonFlags(f.common, {&positional_model});
  if (s.ok()) s = ChatLoop(f);
  return s.ok() ? kExitOk : Fail("chat", s);
}

}  // namespace g4::cli

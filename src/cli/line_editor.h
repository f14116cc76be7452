// Reading what the user types in `g4 chat`. On a terminal: libedit (BSD
// editline) with emacs keys (arrows, Home/End, Ctrl-A/E/K/U/W, Ctrl-R
// search, ~/.editrc) and a persistent history; otherwise plain lines from
// stdin. Prompts go to stderr, so stdout carries only the answers.
//
// Ctrl-C while typing returns kInterrupted (the line is dropped); Ctrl-D on
// an empty line returns kEof. The caller owns SIGINT: its handler must set
// the flag given to Create and not restart system calls (no SA_RESTART), so
// a read in progress returns at once.
//
// Threading: one thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>

namespace g4::cli {

// $XDG_STATE_HOME/g4/history, else ~/.local/state/g4/history; empty when
// neither variable is set.
std::string DefaultHistoryPath();

class LineEditor {
 public:
  enum class Result { kLine, kInterrupted, kEof };

  // `history_path` empty: no history file. The file's folder is created on
  // the first save (mode 0700; the file 0600).
  static std::unique_ptr<LineEditor> Create(const std::string& history_path, const std::atomic<bool>* interrupted);
  virtual ~LineEditor() = default;

  // Reads one line (without its newline); `prompt` is shown first on a
  // terminal.
  virtual Result Read(const std::string& prompt, std::string* line) = 0;
  // Records an entry (a whole message, newlines included) in the history
  // and appends it to the history file.
  virtual void AddHistory(const std::string& entry) = 0;
  // True when reading from a terminal (prompts and editing shown).
  virtual bool interactive() const = 0;
};

}  // namespace g4::cli

#include "cli/line_editor.h"

#include <histedit.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cwchar>
#include <filesystem>


namespace g4::cli {
namespace {

constexpr int kHistorySize = 1000;
constexpr off_t kMaxHistoryFileBytes = off_t{16} << 20;

std::atomic<bool> g_resized{false};
void OnSigwinch(int) { g_resized.store(true); }

// UTF-8 input needs a UTF-8 LC_CTYPE for libedit's wide characters; a
// C/POSIX environment gets C.UTF-8 (always present on Debian).
void EnsureUtf8Ctype() {
  const char* now = std::setlocale(LC_CTYPE, "");
  const std::string name = now ? now : "";
  if (name.find("UTF-8") == std::string::npos && name.find("utf8") == std::string::npos)
    std::setlocale(LC_CTYPE, "C.UTF-8");
}

// Lines from a file descriptor with read(2), so a signal interrupts a read
// at once (stdio would retry).
class PlainReader final : public LineEditor {
 public:
  explicit PlainReader(const std::atomic<bool>* interrupted) : interrupted_(interrupted) {}
  Result Read(const std::string&, std::string* line) override {
    line->clear();
    char c;
    while (true) {
      const ssize_t n = ::read(STDIN_FILENO, &c, 1);
      if (n == 1) {
        if (c == '\n') return Result::kLine;
        line->push_back(c);
        continue;
      }
      if (n == 0) return line->empty() ? Result::kEof : Result::kLine;
      if (errno == EINTR && interrupted_ && interrupted_->load()) return Result::kInterrupted;
      if (errno != EINTR) return Result::kEof;
    }
  }
  void AddHistory(const std::string&) override {}
  bool interactive() const override { return false; }

 private:
  const std::atomic<bool>* interrupted_;
};

class EditlineReader final : public LineEditor {
 public:
  EditlineReader(std::string history_path, const std::atomic<bool>* interrupted)
      : history_path_(std::move(history_path)), interrupted_(interrupted) {
    EnsureUtf8Ctype();
    hist_ = history_init();
    HistEvent ev;
    history(hist_, &ev, H_SETSIZE, kHistorySize);
    history(hist_, &ev, H_SETUNIQUE, 1);
    struct stat st {};
    if (!history_path_.empty() && ::stat(history_path_.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_size <= kMaxHistoryFileBytes)
      history(hist_, &ev, H_LOAD, history_path_.c_str());
    el_ = el_init("g4", stdin, stderr, stderr);
    el_set(el_, EL_CLIENTDATA, this);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_SIGNAL, 0);  // SIGINT stays the caller's
    el_set(el_, EL_HIST, history, hist_);
    el_set(el_, EL_PROMPT, &EditlineReader::PromptOf);
    el_set(el_, EL_GETCFN, &EditlineReader::GetChar);
    el_source(el_, nullptr);  // ~/.editrc, as other editline programs
    struct sigaction sa {};
    sa.sa_handler = OnSigwinch;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, nullptr);
  }
  ~EditlineReader() override {
    el_end(el_);
    history_end(hist_);
  }

  Result Read(const std::string& prompt, std::string* line) override {
    prompt_ = prompt;
    interrupted_now_ = false;
    int count = 0;
    const char* got = el_gets(el_, &count);
    if (interrupted_now_) return Result::kInterrupted;
    if (!got || count <= 0) return Result::kEof;
    line->assign(got, static_cast<size_t>(count));
    if (!line->empty() && line->back() == '\n') line->pop_back();
    return Result::kLine;
  }

  void AddHistory(const std::string& entry) override {
    if (entry.empty()) return;
    HistEvent ev;
    history(hist_, &ev, H_ENTER, entry.c_str());
    Save();
  }
  bool interactive() const override { return true; }

 private:
  static char* PromptOf(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return const_cast<char*>(static_cast<EditlineReader*>(self)->prompt_.c_str());
  }

  // One character from stdin, UTF-8 decoded; -1 ends el_gets when Ctrl-C
  // interrupted the read.
  static int GetChar(EditLine* el, wchar_t* out) {
    void* self_ptr = nullptr;
    el_get(el, EL_CLIENTDATA, &self_ptr);
    auto* self = static_cast<EditlineReader*>(self_ptr);
    std::mbstate_t state{};
    while (true) {
      char c;
      const ssize_t n = ::read(STDIN_FILENO, &c, 1);
      if (n == 0) return 0;
      if (n < 0) {
        if (errno != EINTR) return -1;
        if (self->interrupted_ && self->interrupted_->load()) {
          self->interrupted_now_ = true;
          return -1;
        }
        if (g_resized.exchange(false)) el_resize(el);
        continue;
      }
      wchar_t wc;
      const size_t r = std::mbrtowc(&wc, &c, 1, &state);
      if (r == static_cast<size_t>(-2)) continue;  // more bytes of this character
      if (r == static_cast<size_t>(-1)) {          // not UTF-8: take the byte as is
        state = {};
        wc = static_cast<unsigned char>(c);
      }
      *out = wc;
      return 1;
    }
  }

  // The whole history, written to a new file in the same folder that then
  // replaces the old one (readers never see half a file). A symlink or
  // anything but a regular file at the path is left alone.
  void Save() {
    if (history_path_.empty()) return;
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(history_path_).parent_path();
    if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
      std::filesystem::create_directories(dir, ec);
      ::chmod(dir.c_str(), 0700);
    }
    struct stat st {};
    if (::lstat(history_path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return;
    std::string tmp = history_path_ + ".XXXXXX";
    const int fd = ::mkstemp(tmp.data());  // mode 0600
    if (fd < 0) return;
    FILE* f = ::fdopen(fd, "w");
    if (!f) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return;
    }
    HistEvent ev;
    const bool ok = history(hist_, &ev, H_SAVE_FP, f) >= 0 && std::fflush(f) == 0 && ::fsync(fd) == 0;
    std::fclose(f);
    if (!ok || ::rename(tmp.c_str(), history_path_.c_str()) != 0) ::unlink(tmp.c_str());
  }

  std::string history_path_, prompt_;
  const std::atomic<bool>* interrupted_;
  bool interrupted_now_ = false;
  History* hist_ = nullptr;
  EditLine* el_ = nullptr;
};

}  // namespace

std::string DefaultHistoryPath() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state) return std::string(state) + "/g4/history";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.local/state/g4/history";
  return "";
}

std::unique_ptr<LineEditor> LineEditor::Create(const std::string& history_path, const std::atomic<bool>* interrupted) {
  if (::isatty(STDIN_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1)
    return std::make_unique<EditlineReader>(history_path, interrupted);
  return std::make_unique<PlainReader>(interrupted);
}

}  // namespace g4::cli

#include "model/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/file_io.h"
#include "base/sha256.h"
#include "base/utf8.h"

namespace bitsim::model {

namespace {

// A file read forward in blocks, every byte checked as it arrives: UTF-8 (a sequence split
// across two blocks is checked whole) and the longest run without a space.
class TextReader {
 public:
  TextReader(const std::filesystem::path& path, std::string what) : path_(path), what_(std::move(what)) {
    io::check_input_file(path, what_);
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) throw Error(fmt::format("{} {}: cannot open: {}", what_, path.string(), std::strerror(errno)));
  }
  ~TextReader() { ::close(fd_); }
  TextReader(const TextReader&) = delete;
  TextReader& operator=(const TextReader&) = delete;

  // Reads until `text` holds `want` bytes or the file ends; false once it has ended.
  bool fill(std::string& text, size_t want) {
    char buf[1 << 16];
    while (text.size() < want) {
      const ssize_t k = ::read(fd_, buf, std::min(sizeof buf, want - text.size()));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) throw Error(fmt::format("{} {}: read failed: {}", what_, path_.string(), std::strerror(errno)));
      if (k == 0) {
        check(text, true);
        return false;
      }
      text.append(buf, size_t(k));
      check(text, false);
    }
    return true;
  }

 private:
  // The bytes from checked_ on; at the end of a block a sequence that may go on in the next
  // is left for then.
  void check(const std::string& text, bool at_end) {
    const std::string_view s = std::string_view(text).substr(checked_);
    const std::string name = fmt::format("{} {}", what_, path_.string());
    if (const auto bad = first_invalid_utf8(s)) {
      // Cut short by the block, not by the file: check it when the next block is here.
      const bool may_continue = !at_end && s.size() - *bad < 4 && first_invalid_utf8(s.substr(0, *bad)) == std::nullopt;
      if (!may_continue) check_utf8(s, name, checked_);
      advance(text, checked_ + *bad);
      return;
    }
    advance(text, text.size());
  }
  void advance(const std::string& text, size_t to) {
    for (size_t i = checked_; i < to; ++i) {
      if (text[i] == ' ') run_start_ = i + 1;
      else if (i + 1 - run_start_ > kMaxWordBytes)
        throw Error(fmt::format("{} {}: {} bytes from byte offset {} hold no space: a word SentencePiece would "
                                "segment whole (at most {} bytes)",
                                what_, path_.string(), i + 1 - run_start_, run_start_, kMaxWordBytes));
    }
    checked_ = to;
  }

  std::filesystem::path path_;
  std::string what_;
  int fd_ = -1;
  size_t checked_ = 0, run_start_ = 0;
};

}  // namespace

EncodedText encode_text_file(const Tokenizer& tokenizer, const std::filesystem::path& path, const std::string& what,
                             size_t max_tokens, size_t first_block) {
  TextReader reader(path, what);
  std::string text;
  EncodedText r;
  if (max_tokens == 0) {
    if (reader.fill(text, kMaxTextBytes + 1))
      throw Error(fmt::format("{} {}: more than {} bytes; give a number of tokens to read only the text's start",
                              what, path.string(), kMaxTextBytes));
    r.ids = tokenizer.encode(text);
    r.read_tokens = r.ids.size();
    r.bytes = text.size();
    r.whole = true;
    r.sha256 = sha256_hex(text);
    return r;
  }
  for (size_t want = std::max<size_t>(first_block, 1);; want *= 2) {
    const bool more = reader.fill(text, want);
    // The prefix to encode: all of it at the end of the file, else up to its last space.
    size_t cut = text.size();
    if (more) {
      const size_t space = text.rfind(' ');
      if (space == std::string::npos || space == 0) continue;
      cut = space;
    }
    std::vector<int> ids = tokenizer.encode(text.substr(0, cut));
    if (ids.size() >= max_tokens || !more) {
      r.read_tokens = ids.size();
      if (ids.size() > max_tokens) ids.resize(max_tokens);
      r.ids = std::move(ids);
      r.bytes = cut;
      r.whole = !more;
      r.sha256 = sha256_hex(std::string_view(text).substr(0, cut));
      return r;
    }
  }
}

}  // namespace bitsim::model

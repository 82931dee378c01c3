#include "snowflake/status_text.h"

#include <array>
#include <atomic>
#include <cstring>

namespace snowflake::shm {
namespace {

constexpr size_t kWords = sizeof(SegmentHeader::status_text) / sizeof(uint64_t);
static_assert(kWords * sizeof(uint64_t) == kStatusTextBytes, "whole words of text");

}  // namespace

std::string_view TruncateUtf8(std::string_view text, size_t max_bytes) noexcept {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Back off continuation bytes (10xxxxxx): the cut then falls before a lead byte.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

std::string FitStatusText(std::string_view text) {
  if (text.size() <= kStatusTextBytes) return std::string(text);
  constexpr std::string_view kJoin = " \xe2\x80\xa6 ";  // " … "
  std::string_view head = TruncateUtf8(text, kStatusTextHeadBytes);
  // Whole words where there are any: "etcd unreachable at …", not "etcd unreacha …".
  if (const size_t space = head.rfind(' '); space != std::string_view::npos && space > 0) {
    head = head.substr(0, space);
  }
  size_t from = text.size() - (kStatusTextBytes - head.size() - kJoin.size());
  if (const size_t space = text.find(' ', from); space != std::string_view::npos) {
    from = space + 1;
  }
  // Skip continuation bytes (10xxxxxx): the tail then starts at a lead byte.
  while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
  std::string out(head);
  out += kJoin;
  out += text.substr(from);
  return out;
}

void WriteStatusText(SegmentHeader& header, std::string_view text) noexcept {
  text = TruncateUtf8(text, kStatusTextBytes);
  std::array<unsigned char, kStatusTextBytes> bytes{};
  std::memcpy(bytes.data(), text.data(), text.size());
  // Relaxed: only this thread writes the word.
  const uint64_t seq = header.status_text_seq.load(std::memory_order_relaxed);
  // Odd first. Each word of the text is then stored with release, which keeps the odd
  // word before it: a reader that sees one of them (acquire) then sees the odd word, or a
  // later one, and retries. (Release stores, not a release fence: ThreadSanitizer cannot
  // check fences, and a text is written only on a change of state.)
  header.status_text_seq.store(seq | 1, std::memory_order_relaxed);
  for (size_t i = 0; i < kWords; ++i) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i * sizeof(word), sizeof(word));
    header.status_text[i].store(word, std::memory_order_release);
  }
  // Release: a reader that loads this even value (acquire) sees every word above.
  header.status_text_seq.store((seq | 1) + 1, std::memory_order_release);
}

std::optional<std::string> ReadStatusText(const SegmentHeader& header) {
  std::array<char, kStatusTextBytes> bytes{};
  for (int attempt = 0; attempt < kStatusTextReadTries; ++attempt) {
    // Acquire: pairs with the writer's final release store; the words read below are at
    // least as new as that write.
    const uint64_t before = header.status_text_seq.load(std::memory_order_acquire);
    if (before % 2 != 0) continue;  // a write is under way
    // Acquire on each word orders it before the second load of the sequence: if a write
    // began before any of them read its value, that load sees its odd (or later) value,
    // and the text is read again.
    for (size_t i = 0; i < kWords; ++i) {
      const uint64_t word = header.status_text[i].load(std::memory_order_acquire);
      std::memcpy(bytes.data() + i * sizeof(word), &word, sizeof(word));
    }
    if (header.status_text_seq.load(std::memory_order_relaxed) != before) continue;
    const size_t length = strnlen(bytes.data(), bytes.size());
    return std::string(bytes.data(), length);
  }
  return std::nullopt;
}

}  // namespace snowflake::shm

// The header's status text (snowflake/status_text.h): a seqlock with one writer, readers
// that only read. Property: a reader returns a text the writer wrote whole, "" for none,
// or nullopt (a write under way); never a mix of two writes.

#include "snowflake/status_text.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

namespace snowflake::shm {
namespace {

// A zeroed header page, as a fresh segment file is.
std::unique_ptr<SegmentHeader> ZeroHeader() {
  auto header = std::make_unique<SegmentHeader>();
  std::memset(static_cast<void*>(header.get()), 0, sizeof(SegmentHeader));
  return header;
}

TEST(StatusText, BytesThatWereReservedZeroReadAsNoText) {
  // Arrange
  auto sut = ZeroHeader();
  // Act
  const auto text = ReadStatusText(*sut);
  // Assert
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(*text, "");
}

TEST(StatusText, ReadsBackTheLastTextWrittenAndAnEmptyOneClearsIt) {
  // Arrange
  auto sut = ZeroHeader();
  // Act
  WriteStatusText(*sut, "register etcd http://127.0.0.1:2379 /snowflake; a longer first text");
  WriteStatusText(*sut, "register etcd http://127.0.0.1:2379 /snowflake");
  const auto second = ReadStatusText(*sut);
  WriteStatusText(*sut, "");
  const auto cleared = ReadStatusText(*sut);
  // Assert
  EXPECT_EQ(second, "register etcd http://127.0.0.1:2379 /snowflake");
  EXPECT_EQ(cleared, "");
  EXPECT_EQ(sut->status_text_seq.load() % 2, 0u);
}

TEST(StatusText, ALongTextIsCutAtACharacterBoundary) {
  // Arrange: 447 ASCII bytes, then a 3-byte character that would end at byte 450.
  auto sut = ZeroHeader();
  const std::string text = std::string(kStatusTextBytes - 1, 'x') + "\xe2\x80\xa6 and more";
  // Act
  WriteStatusText(*sut, text);
  const auto read = ReadStatusText(*sut);
  // Assert
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, std::string(kStatusTextBytes - 1, 'x'));
  EXPECT_EQ(TruncateUtf8("ab\xe2\x80\xa6", 4), "ab");
  EXPECT_EQ(TruncateUtf8("ab\xe2\x80\xa6", 5), "ab\xe2\x80\xa6");
}

// A text too long for the header keeps what says what waits (its beginning) and the
// innermost cause (its end, where a chained error names the member that timed out).
TEST(StatusText, ALongTextKeepsItsBeginningAndItsEnd) {
  // Arrange
  std::string middle;
  for (int i = 0; i < 100; ++i) middle += "word" + std::to_string(i) + " ";
  const std::string text = "register etcd http://127.0.0.1:1 /p/; last error: " + middle +
                           "at http://127.0.0.1:2: Operation timed out";
  const std::string unbroken = std::string(300, 'a') + std::string(300, 'b');
  // Act
  const std::string sut = FitStatusText(text);
  const std::string cut = FitStatusText(unbroken);
  // Assert
  EXPECT_LE(sut.size(), kStatusTextBytes);
  EXPECT_EQ(sut.rfind("register etcd http://127.0.0.1:1 /p/; last error: word0 ", 0), 0u) << sut;
  EXPECT_NE(sut.find(" \xe2\x80\xa6 word"), std::string::npos) << "cut inside a word: " << sut;
  EXPECT_TRUE(sut.ends_with(" at http://127.0.0.1:2: Operation timed out")) << sut;
  EXPECT_EQ(cut.size(), kStatusTextBytes);
  EXPECT_EQ(cut, std::string(kStatusTextHeadBytes, 'a') + " \xe2\x80\xa6 " +
                     std::string(kStatusTextBytes - kStatusTextHeadBytes - 5, 'b'));
  EXPECT_EQ(FitStatusText("short"), "short");
}

// A writer stopped half way (killed, or preempted between its stores): the sequence word
// is odd and the words are half old, half new. A reader must not return that.
TEST(StatusText, ATornWriteIsNeverReadAsText) {
  // Arrange
  auto sut = ZeroHeader();
  WriteStatusText(*sut, std::string(kStatusTextBytes, 'a'));
  const uint64_t seq = sut->status_text_seq.load();
  sut->status_text_seq.store(seq + 1);  // the writer began...
  for (size_t i = 0; i < 28; ++i) {     // ...and wrote half of the new text
    sut->status_text[i].store(0x6262626262626262ull);  // "bbbbbbbb"
  }
  // Act
  const auto torn = ReadStatusText(*sut);
  WriteStatusText(*sut, std::string(kStatusTextBytes, 'b'));  // a writer that recovers
  const auto whole = ReadStatusText(*sut);
  // Assert
  EXPECT_FALSE(torn.has_value()) << "read a torn text: " << torn.value_or("");
  EXPECT_EQ(whole, std::string(kStatusTextBytes, 'b'));
}

// The checker of the property on its own first: it refuses a mix.
bool IsOneWholeText(const std::string& text) {
  if (text.empty()) return true;
  if (text.size() != kStatusTextBytes) return false;
  return text.find_first_not_of(text[0]) == std::string::npos;
}

TEST(StatusText, TheWholeTextCheckerRefusesAMix) {
  EXPECT_TRUE(IsOneWholeText(std::string(kStatusTextBytes, 'a')));
  EXPECT_FALSE(IsOneWholeText(std::string(8, 'a') + std::string(kStatusTextBytes - 8, 'b')));
  EXPECT_FALSE(IsOneWholeText(std::string(8, 'a')));
}

TEST(StatusText, ReadersRacingAWriterSeeOnlyWholeTexts) {
  // Arrange: a writer alternating two full-length texts, a reader reading throughout.
  auto sut = ZeroHeader();
  std::atomic<bool> stop{false};
  std::atomic<bool> reader_ready{false};
  std::thread writer([&] {
    // Both run at once: a writer done before the reader began would test nothing.
    while (!reader_ready.load()) std::this_thread::yield();
    for (int i = 0; i < 200'000; ++i) {
      WriteStatusText(*sut, std::string(kStatusTextBytes, i % 2 == 0 ? 'a' : 'b'));
    }
    stop.store(true);
  });
  // Act
  uint64_t reads = 0;
  uint64_t mixed = 0;
  std::string example;
  reader_ready.store(true);
  while (!stop.load()) {
    const auto text = ReadStatusText(*sut);
    if (!text) continue;
    ++reads;
    if (!IsOneWholeText(*text)) {
      ++mixed;
      example = *text;
    }
  }
  writer.join();
  const auto last = ReadStatusText(*sut);
  // Assert
  EXPECT_GT(reads, 0u) << "no read overlapped the writes: the race was not run";
  EXPECT_EQ(mixed, 0u) << "e.g. " << example.substr(0, 80) << " (of " << reads << " reads)";
  EXPECT_EQ(last, std::string(kStatusTextBytes, 'b'));
}

}  // namespace
}  // namespace snowflake::shm

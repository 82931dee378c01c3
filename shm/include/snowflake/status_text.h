// The segment's status text (SegmentHeader::status_text, shm/LAYOUT.md §3, lines 5-11):
// why the daemon is not serving, in its own words, for clients to put in their errors. A
// seqlock: one writer (the daemon's fill loop), any number of readers in other processes
// that may only read the page (clients map the header read-only), so a reader never
// blocks or writes; it retries while a write is under way and gives up after a bound.
//
// The writer and a reader are safe to run concurrently, in any processes; two writers are
// not (REQUIRES: one thread of one process writes a segment's text). Neither allocates
// except ReadStatusText's result; neither makes a system call. Readers call it only when
// building an error or a status, never on the take path.

#ifndef SNOWFLAKE_STATUS_TEXT_H_
#define SNOWFLAKE_STATUS_TEXT_H_

#include <optional>
#include <string>
#include <string_view>

#include "snowflake/segment_layout.h"

namespace snowflake::shm {

// How many times a reader tries before it gives up on a text that keeps changing.
inline constexpr int kStatusTextReadTries = 64;

// Stores `text` (truncated to kStatusTextBytes at a UTF-8 character boundary) as the
// header's status text; "" clears it. Readers see the old text or the new one, whole.
void WriteStatusText(SegmentHeader& header, std::string_view text) noexcept;

// The header's status text: "" when there is none (bytes still zero, or cleared); nullopt
// when every try of kStatusTextReadTries found a write under way or finished during the
// read (a writer that died mid-write leaves the word odd: then never). Throws
// std::bad_alloc only.
std::optional<std::string> ReadStatusText(const SegmentHeader& header);

// `text` cut to at most `max_bytes`, never inside a UTF-8 character.
std::string_view TruncateUtf8(std::string_view text, size_t max_bytes) noexcept;

// `text` if it fits kStatusTextBytes; else at most its first kStatusTextHeadBytes and as
// much of its end as fits, joined by " … ", cut between words where it has spaces and
// never inside a UTF-8 character. The end is kept because
// a chained error names its innermost cause last (the etcd member that timed out), and
// the beginning because it says what waits (the register and its endpoints). Throws
// std::bad_alloc only.
inline constexpr size_t kStatusTextHeadBytes = 192;
std::string FitStatusText(std::string_view text);

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_STATUS_TEXT_H_

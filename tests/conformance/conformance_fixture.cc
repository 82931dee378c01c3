// conformance_fixture: writes the segment of one row of the takers' conformance table
// (cases.json) into a runtime directory, at the layout's offsets (offsetof on the C++
// definitions, segment_layout.h), and plays the daemon's control socket for it, so that
// every taker reads fixtures of one origin.
//
//   conformance_fixture --cases cases.json --case NAME --dir DIR --live-pid PID [--after-open]
//   conformance_fixture --region-words --dir DIR
//   conformance_fixture --vocabulary
//   conformance_fixture --layout
//
// Without --after-open: the row's `fixture` (over the table's `defaults`) into DIR, which
// must exist: the ring file, and the consumer region as a memfd of the row's size and
// seals, which a server process it leaves behind hands out on DIR/control.sock the way the
// row's `attach` says (serve it as the daemon does; answer without a descriptor, or with a
// pipe's; refuse the command; listen as another user; or no socket at all). The server
// exits once its socket is gone or replaced, or the live pid is. With --after-open: the
// row's `after_open` change (replace the segment by a new one, served by a new server;
// try to resize the region, which its seals must refuse; publish IDs once the taker
// waits, from a process it leaves behind). Prints {"ids":[...]}: the IDs the ring file it
// wrote holds (or will hold, for a publish), in ticket order, decimal strings. Times are
// read when it runs: the taker runs it right before opening (or taking), so "fresh" and
// "N ms old" mean that when it takes. `--live-pid` is a process that stays alive while the
// taker takes (the taker's own): the "live" daemon pid of the row. --region-words attaches
// to DIR's socket as a taker does and prints the region's words a runner checks, the
// service counts summed per name the way the daemon reads them (ForEachService):
// {"refill_request":N,"refill_hint":N,"waiters":N,"uncounted":N,"service_taken":{NAME:N}}.
// --vocabulary prints the C++ tables a taker of another language copies
// (protocol/vocabulary.h): the library's error codes by status with their actions, the
// state, health and reason codes and the reasons' texts (detail 5), so its test can
// compare; every taker's runner reads the actions from it to check that the class of each
// error a row expects follows its code's action. --layout
// prints, as one JSON object, every offset (offsetof), size (sizeof) and constant of the
// segment's layout (segment_layout.h, with the status text's read bound and the ID's time
// shift) that a taker reading the segment natively copies (Go, bindings/go/segment.go),
// keyed by the C++ expression, so its test compares each copy with its definition. Exit
// status 0, or 2 with a message on stderr.

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "protocol/control_client.h"
#include "protocol/control_protocol.h"
#include "protocol/descriptor_passing.h"
#include "protocol/vocabulary.h"
#include "snowflake/boot_id.h"
#include "snowflake/id_layout.h"
#include "snowflake/pid_namespace.h"
#include "snowflake/segment_layout.h"
#include "snowflake/status_text.h"
#include "snowflake/unique_fd.h"

namespace {

using nlohmann::json;
using snowflake::shm::ConsumerRegion;
using snowflake::shm::CounterLane;
using snowflake::shm::SegmentHeader;
using snowflake::shm::ServiceSlot;

constexpr uint64_t kEpochUnixMs = 1'767'225'600'000;  // the default epoch
constexpr uint32_t kMachine = 7;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "conformance_fixture: %s\n", why.c_str());
  std::exit(2);
}

// One file written field by field at the layout's offsets.
class File {
 public:
  File(const std::string& path, int mode) {
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) Die("open " + path + ": " + std::strerror(errno));
    // fchmod: the exact mode, whatever the umask.
    if (fchmod(fd_, static_cast<mode_t>(mode)) != 0) Die("fchmod " + path);
  }
  ~File() { close(fd_); }
  void Resize(uint64_t size) {
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0) Die("ftruncate");
  }
  template <typename T>
  void Put(size_t offset, T value) {
    if (pwrite(fd_, &value, sizeof value, static_cast<off_t>(offset)) != sizeof value) {
      Die("pwrite");
    }
  }
  void PutBytes(size_t offset, std::string_view bytes) {
    if (pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset)) !=
        static_cast<ssize_t>(bytes.size())) {
      Die("pwrite");
    }
  }

 private:
  int fd_ = -1;
};

uint64_t Clock(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

// A pid no process has: a child that exited and was reaped.
uint64_t DeadPid() {
  const pid_t child = fork();
  if (child < 0) Die("fork");
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return static_cast<uint64_t>(child);
}

json Merged(const json& defaults, const json& over) {
  json out = defaults;
  for (auto it = over.begin(); it != over.end(); ++it) out[it.key()] = it.value();
  return out;
}

int Mode(const json& f, const char* key) {
  return std::stoi(f.at(key).get<std::string>(), nullptr, 8);
}

// A whole number from 0 (JSON has one kind of number; nlohmann keeps integers apart).
bool IsCount(const json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
}

// The service of the slots a row gives to other clients (every runner's taker opens as
// "conformance").
constexpr std::string_view kOtherService = "other";

// A service name as a slot's name words hold it: NUL-padded, 8 bytes per word, little-endian
// (LAYOUT.md §4, ServiceSlot).
std::vector<uint64_t> NameWords(std::string_view name) {
  std::vector<uint64_t> words(sizeof(ServiceSlot::name) / 8, 0);
  for (size_t i = 0; i < name.size(); ++i) {
    words[i / 8] |= uint64_t{static_cast<unsigned char>(name[i])} << (8 * (i % 8));
  }
  return words;
}

std::string NameOf(const ServiceSlot& slot) {
  std::string name;
  for (const auto& word : slot.name) {
    const uint64_t value = word.load(std::memory_order_relaxed);
    for (int b = 0; b < 8; ++b) {
      const char c = static_cast<char>(value >> (8 * b) & 0xff);
      if (c == '\0') return name;
      name += c;
    }
  }
  return name;
}

// The row's consumer region: a memfd of `region_size` bytes (the format's by default)
// whose head and segment id are written, sealed with `region_seals` ("shrink|grow|seal",
// the format's; "none"; or any '|'-list of seal, shrink, grow, write). The first
// `slots_claimed_by_others` service slots belong to another live client (owner pid 1,
// which always exists; service "other", active, one ID counted in `taken`): a taker must
// claim a slot past them, leave their counts alone, and count in `uncounted` when all of
// them are claimed.
snowflake::UniqueFd MakeRegion(const json& f, uint64_t segment_id, uint64_t head) {
  snowflake::UniqueFd fd(memfd_create("conformance-region", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) Die(std::string("memfd_create: ") + std::strerror(errno));
  const uint64_t size = f.value("region_size", snowflake::shm::kConsumerRegionSize);
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) Die("ftruncate the region");
  const auto put = [&](size_t offset, uint64_t value) {
    if (offset + sizeof value <= size &&
        pwrite(fd.get(), &value, sizeof value, static_cast<off_t>(offset)) != sizeof value) {
      Die("pwrite the region");
    }
  };
  put(offsetof(ConsumerRegion, head), head);
  put(offsetof(ConsumerRegion, segment_id),
      f.at("consumer_segment_id") == "same" ? segment_id : segment_id + 1);
  const json& others = f.value("slots_claimed_by_others", json(0));
  if (!IsCount(others) || others.get<uint64_t>() > snowflake::shm::kServiceSlotCount) {
    Die("slots_claimed_by_others: " + others.dump() + " is not a number from 0 to " +
        std::to_string(snowflake::shm::kServiceSlotCount) + " (the region's service slots)");
  }
  const std::vector<uint64_t> other_name = NameWords(kOtherService);
  for (uint64_t i = 0; i < others.get<uint64_t>(); ++i) {
    const size_t slot = offsetof(ConsumerRegion, services) + i * sizeof(ServiceSlot);
    put(slot + offsetof(ServiceSlot, owner_pid), 1);
    put(slot + offsetof(ServiceSlot, taken), 1);
    for (size_t w = 0; w < other_name.size(); ++w) {
      put(slot + offsetof(ServiceSlot, name) + 8 * w, other_name[w]);
    }
    put(slot + offsetof(ServiceSlot, name_ready), snowflake::shm::kServiceSlotActive);
  }
  const std::string seals = f.value("region_seals", std::string("shrink|grow|seal"));
  int bits = 0;
  if (seals != "none") {
    size_t start = 0;
    while (start <= seals.size()) {
      const size_t end = std::min(seals.find('|', start), seals.size());
      const std::string seal = seals.substr(start, end - start);
      if (seal == "seal")
        bits |= F_SEAL_SEAL;
      else if (seal == "shrink")
        bits |= F_SEAL_SHRINK;
      else if (seal == "grow")
        bits |= F_SEAL_GROW;
      else if (seal == "write")
        bits |= F_SEAL_WRITE;
      else
        Die("region_seals: unknown seal \"" + seal + "\"");
      start = end + 1;
    }
  }
  // F_SEAL_SEAL last: it forbids adding the others.
  if ((bits & ~F_SEAL_SEAL) != 0 && fcntl(fd.get(), F_ADD_SEALS, bits & ~F_SEAL_SEAL) != 0) {
    Die(std::string("seal the region: ") + std::strerror(errno));
  }
  if ((bits & F_SEAL_SEAL) != 0 && fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SEAL) != 0) {
    Die(std::string("seal the region: ") + std::strerror(errno));
  }
  return fd;
}

// Reads one request line from `fd` (at most 4096 bytes, 2 s); false if none came.
bool ReadRequest(int fd) {
  std::string line;
  char c = 0;
  while (line.size() < 4096) {
    pollfd entry{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&entry, 1, 2000) <= 0) return false;
    if (read(fd, &c, 1) != 1) return !line.empty();
    if (c == '\n') return true;
    line += c;
  }
  return false;
}

void SendReply(int fd, const std::string& text, int descriptor) {
  const std::string line = text + "\n";
  [[maybe_unused]] const ssize_t sent =
      snowflake::protocol::SendWithDescriptor(fd, line, descriptor, MSG_NOSIGNAL);
}

// The server's answers, until its socket is gone or replaced or `live_pid` exits (at most
// ten minutes): one connection at a time, each answered and closed, as the row's `attach`
// says.
[[noreturn]] void Serve(int listener, const std::string& socket_path, ino_t inode,
                        const std::string& mode, const snowflake::UniqueFd& region,
                        uint64_t segment_id, uint64_t live_pid) {
  const auto started = Clock(CLOCK_MONOTONIC);
  int pipe_fds[2] = {-1, -1};
  if (mode == "pipe_descriptor" && pipe(pipe_fds) != 0) _exit(2);
  for (;;) {
    struct stat info {};
    if (stat(socket_path.c_str(), &info) != 0 || info.st_ino != inode) _exit(0);
    if (kill(static_cast<pid_t>(live_pid), 0) != 0 && errno == ESRCH) _exit(0);
    if (Clock(CLOCK_MONOTONIC) - started > 600'000'000'000ull) _exit(0);
    pollfd entry{.fd = listener, .events = POLLIN, .revents = 0};
    if (poll(&entry, 1, 50) <= 0) continue;
    const snowflake::UniqueFd connection(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!connection || !ReadRequest(connection.get())) continue;
    namespace protocol = snowflake::protocol;
    const std::string accepted = protocol::Dump(protocol::AttachReplyJson(
        protocol::AttachRecord{.segment_id = segment_id,
                               .format_version = snowflake::shm::kVersion,
                               .region_bytes = snowflake::shm::kConsumerRegionSize}));
    if (mode == "unknown_command") {
      SendReply(connection.get(),
                protocol::Dump(protocol::ErrorReplyJson(
                    snowflake::vocab::ErrorCode::kUnknownCommand,
                    "unknown command \"attach\": expected \"status\" or \"resume\"")),
                -1);
    } else if (mode == "no_descriptor") {
      SendReply(connection.get(), accepted, -1);
    } else if (mode == "pipe_descriptor") {
      SendReply(connection.get(), accepted, pipe_fds[0]);
    } else {
      SendReply(connection.get(), accepted, region.get());
    }
  }
}

// Leaves a server process behind that hands out `region` on dir/control.sock per `mode`
// (the row's `attach`), and returns once it listens. The socket is bound under another
// name and renamed into place, so a server that replaces another never leaves the path
// empty.
void StartServer(const std::string& dir, const std::string& mode, snowflake::UniqueFd region,
                 uint64_t segment_id, uint64_t live_pid) {
  if (mode == "none") return;
  const std::string socket_path = dir + "/control.sock";
  const std::string temporary = socket_path + ".new";
  int ready[2];
  if (pipe(ready) != 0) Die("pipe");
  const pid_t child = fork();
  if (child < 0) Die("fork");
  if (child > 0) {
    close(ready[1]);
    char byte = 0;
    const bool listening = read(ready[0], &byte, 1) == 1;
    close(ready[0]);
    if (!listening) Die("the attach server did not start (see the row's attach)");
    return;
  }
  // The server: out of the runner's process group, and off its pipes (the runner reads
  // this program's output to its end).
  close(ready[0]);
  setsid();
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  dup2(null, 0);
  dup2(null, 1);
  dup2(null, 2);
  const snowflake::UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (!listener || temporary.size() >= sizeof(address.sun_path)) _exit(2);
  std::memcpy(address.sun_path, temporary.c_str(), temporary.size() + 1);
  unlink(temporary.c_str());
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) _exit(2);
  if (chmod(temporary.c_str(), 0666) != 0 || rename(temporary.c_str(), socket_path.c_str()) != 0) {
    _exit(2);
  }
  struct stat info {};
  if (stat(socket_path.c_str(), &info) != 0) _exit(2);
  // A listener of another user: SO_PEERCRED reports the effective ids of whoever called
  // listen(2). Only for that call, so the server can still watch its socket's path in a
  // directory uid 65534 may not search.
  if (mode == "other_user" && (setegid(65534) != 0 || seteuid(65534) != 0)) _exit(2);
  if (listen(listener.get(), 64) != 0) _exit(2);
  if (mode == "other_user" && (seteuid(0) != 0 || setegid(0) != 0)) _exit(2);
  [[maybe_unused]] const ssize_t wrote = write(ready[1], "x", 1);
  close(ready[1]);
  Serve(listener.get(), socket_path, info.st_ino, mode, region, segment_id, live_pid);
}

// Writes the ring file per `f` into dir and serves its region; returns the IDs it
// published, in ticket order. `segment_id` tells a replacement from the first segment.
// The row's ID layout: `layout` as snowflaked's config writes it ("41/16/6", a preset).
snowflake::IdLayout LayoutOf(const json& f) {
  const std::string text = f.at("layout");
  auto bits = snowflake::ParseIdBits(text, kEpochUnixMs);
  if (!bits) Die("layout: " + bits.error());
  return snowflake::IdLayout::Create(kEpochUnixMs, *bits).value();
}

std::vector<uint64_t> WriteSegment(const std::string& dir, const json& f, uint64_t live_pid,
                                   uint64_t segment_id, bool via_rename) {
  const std::string ring_path = dir + "/" + std::string(snowflake::shm::kSegmentFileName);
  const std::string files = f.at("files");
  std::vector<uint64_t> ids;
  if (files == "none") return ids;
  if (files == "ring_is_directory") {
    if (mkdir(ring_path.c_str(), 0750) != 0) Die("mkdir " + ring_path);
    return ids;
  }
  // A symlink at the ring file's path to a complete, valid ring file beside it: only the
  // link itself can be refused.
  const bool ring_is_symlink = files == "ring_is_symlink";
  const std::string ring_target = ring_is_symlink ? ring_path + ".real" : ring_path;
  const uint64_t capacity = f.at("capacity");
  const uint64_t fill = f.at("fill");
  const uint64_t tail = f.value("tail", fill);
  const uint64_t head = f.value("head", tail - fill);
  const std::string suffix = via_rename ? ".tmp" : "";
  const snowflake::IdLayout layout = LayoutOf(f);
  snowflake::UniqueFd region = MakeRegion(f, segment_id, head);
  {
    File ring(ring_target + suffix, Mode(f, "ring_mode"));
    const uint64_t size = snowflake::shm::SegmentSizeFor(capacity);
    ring.Resize(f.value("ring_size", size));
    if (f.value("ring_size", size) < snowflake::shm::kSlotsOffset) {
      // Shorter than its header: nothing of the layout fits.
    } else {
      const int64_t now_ms = static_cast<int64_t>(Clock(CLOCK_REALTIME) / 1'000'000);
      const int64_t id_ms = now_ms + f.at("slot_offset_ms").get<int64_t>();
      const auto zero = f.at("zero_slots").get<std::vector<uint64_t>>();
      for (uint64_t i = 0; i < fill; ++i) {
        const uint64_t ticket = tail - fill + i;
        uint64_t id = layout.EncodeUnchecked(id_ms - static_cast<int64_t>(kEpochUnixMs),
                                             kMachine & layout.max_machine(),
                                             static_cast<uint32_t>(i) & layout.max_sequence());
        for (uint64_t z : zero) {
          if (z == i) id = 0;  // a slot read before its write landed
        }
        ring.Put<uint64_t>(snowflake::shm::kSlotsOffset + (ticket & (capacity - 1)) * 8, id);
        ids.push_back(id);
      }
      const uint64_t pid = f.at("pid") == "live" ? live_pid : f.at("pid") == "dead" ? DeadPid() : 0;
      const uint32_t ns = snowflake::shm::CurrentPidNamespace();
      const uint32_t pid_ns = f.at("pid_namespace") == "current" ? ns
                              : f.at("pid_namespace") == "other" ? ns + 1
                                                                 : 0;
      snowflake::shm::BootId boot = snowflake::shm::CurrentBootId();
      if (f.at("boot_id") == "other") {
        boot.high ^= 0x5a5a5a5a5a5a5a5a;
        boot.low ^= 1;
      } else if (f.at("boot_id") == "none") {
        boot = {};
      }
      const int64_t age_ms = f.at("heartbeat_age_ms");
      const uint64_t beat =
          static_cast<uint64_t>(static_cast<int64_t>(Clock(CLOCK_MONOTONIC)) - age_ms * 1'000'000);
      ring.Put<uint32_t>(offsetof(SegmentHeader, version),
                         f.value("version", snowflake::shm::kVersion));
      ring.Put<uint32_t>(offsetof(SegmentHeader, header_size),
                         f.value("header_size_field", uint32_t{sizeof(SegmentHeader)}));
      ring.Put<uint64_t>(offsetof(SegmentHeader, capacity), f.value("capacity_field", capacity));
      ring.Put<uint64_t>(offsetof(SegmentHeader, segment_size),
                         f.value("segment_size_field", size));
      ring.Put<uint64_t>(offsetof(SegmentHeader, segment_id), segment_id);
      ring.Put<uint64_t>(offsetof(SegmentHeader, slots_offset),
                         f.value("slots_offset_field", snowflake::shm::kSlotsOffset));
      ring.Put<uint64_t>(offsetof(SegmentHeader, epoch_unix_ms), kEpochUnixMs);
      ring.Put<uint32_t>(offsetof(SegmentHeader, machine), kMachine);
      ring.Put<uint32_t>(offsetof(SegmentHeader, id_bits),
                         snowflake::shm::PackIdBits(layout.bits()));
      ring.Put<uint64_t>(offsetof(SegmentHeader, tail), tail);
      ring.Put<uint64_t>(offsetof(SegmentHeader, last_published_id), ids.empty() ? 0 : ids.back());
      ring.Put<uint32_t>(offsetof(SegmentHeader, state), f.at("state").get<uint32_t>());
      ring.Put<uint32_t>(offsetof(SegmentHeader, reason), f.at("reason").get<uint32_t>());
      ring.Put<int64_t>(offsetof(SegmentHeader, reason_detail),
                        f.at("reason_detail").get<int64_t>());
      ring.Put<uint64_t>(offsetof(SegmentHeader, heartbeat_mono_ns), beat);
      ring.Put<uint64_t>(offsetof(SegmentHeader, pid), pid);
      ring.Put<uint64_t>(offsetof(SegmentHeader, incarnation), 1);
      ring.Put<uint64_t>(offsetof(SegmentHeader, published_total), tail);
      ring.Put<uint32_t>(offsetof(SegmentHeader, max_age_ms), 100);
      ring.Put<uint32_t>(offsetof(SegmentHeader, liveness_ms), f.at("liveness_ms").get<uint32_t>());
      ring.Put<uint32_t>(offsetof(SegmentHeader, freshness_bound_ms),
                         f.at("freshness_bound_ms").get<uint32_t>());
      ring.Put<uint32_t>(offsetof(SegmentHeader, pid_namespace), pid_ns);
      ring.Put<uint64_t>(offsetof(SegmentHeader, boot_id_high), boot.high);
      ring.Put<uint64_t>(offsetof(SegmentHeader, boot_id_low), boot.low);
      // The daemon's status text (LAYOUT.md §3, lines 5-11): the words, then an even
      // sequence word, as a finished write leaves them.
      const std::string text = f.at("status_text");
      if (text.size() > sizeof(SegmentHeader::status_text))
        Die("status_text: longer than 448 bytes");
      ring.PutBytes(offsetof(SegmentHeader, status_text), text);
      ring.Put<uint64_t>(offsetof(SegmentHeader, status_text_seq), text.empty() ? 0 : 2);
      // Last, as the daemon stores it (LAYOUT.md §3, line 0).
      ring.Put<uint64_t>(offsetof(SegmentHeader, magic), f.value("magic", snowflake::shm::kMagic));
    }
  }
  if (f.value("ring_owner", std::string("daemon")) == "other") {
    // Another user's file where the daemon's belongs (the runtime directory's owner is the
    // expected one). Only root may give a file away: the runners run as root in CI.
    if (chown((ring_target + suffix).c_str(), 65534, static_cast<gid_t>(-1)) != 0) {
      Die("chown " + ring_target + " to uid 65534: " + std::strerror(errno) +
          " (the ring_owner row needs root)");
    }
  }
  if (ring_is_symlink && symlink(ring_target.c_str(), ring_path.c_str()) != 0) {
    Die("symlink " + ring_path + ": " + std::strerror(errno));
  }
  if (via_rename && rename((ring_path + suffix).c_str(), ring_path.c_str()) != 0) Die("rename");
  StartServer(dir, f.value("attach", std::string("serve")), std::move(region), segment_id,
              live_pid);
  return ids;
}

// The table is strict: a key that no reader knows (a typo) would test the default segment
// and pass, so it fails the row. Every taker runs this program for every row it runs, so a
// bad row fails all five runs.
void CheckKeys(const json& object, const std::set<std::string>& known, const std::string& where) {
  if (!object.is_object()) throw std::runtime_error(where + " is not a JSON object");
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!known.contains(it.key())) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw std::runtime_error(where + " has the unknown key \"" + it.key() + "\" (known: " + list +
                               ")");
    }
  }
}

// The expected region words are counts, compared exactly with --region-words' (a runner
// compares service_taken as a whole: a service it does not name must have no slot).
void CheckRegionExpect(const json& expect, const std::string& where) {
  for (const char* key : {"refill_hint", "refill_request_min", "uncounted", "waiters"}) {
    if (expect.contains(key) && !IsCount(expect.at(key))) {
      throw std::runtime_error(where + ": " + key + " is " + expect.at(key).dump() +
                               ", not a count (a number from 0)");
    }
  }
  if (!expect.contains("service_taken")) return;
  const json& services = expect.at("service_taken");
  bool counts = services.is_object();
  for (auto it = services.begin(); counts && it != services.end(); ++it) {
    counts = IsCount(it.value());
  }
  if (!counts) {
    throw std::runtime_error(where + ": service_taken is " + services.dump() +
                             ", not an object of service names and counts, such as "
                             "{\"conformance\": 1}");
  }
}

// The row's keys, and those of its parts, against what the runners and this program read;
// an override per taker needs its `why` (any row may have one).
void CheckRow(const json& table, const json& row) {
  const std::string name = "case " + row.at("name").get<std::string>();
  CheckKeys(table, {"about", "defaults", "cases"}, "the table");
  // The fixture's keys: the defaults' (every one of which WriteSegment reads), plus the
  // ones a row may add to forge a field.
  std::set<std::string> fixture_keys = {"head",
                                        "tail",
                                        "region_size",
                                        "region_seals",
                                        "attach",
                                        "ring_size",
                                        "version",
                                        "capacity_field",
                                        "segment_size_field",
                                        "header_size_field",
                                        "slots_offset_field",
                                        "ring_owner",
                                        "magic",
                                        "slots_claimed_by_others"};
  for (auto it = table.at("defaults").begin(); it != table.at("defaults").end(); ++it) {
    fixture_keys.insert(it.key());
  }
  CheckKeys(row, {"name", "fixture", "after_open", "take", "expect", "expect_by_taker", "why"},
            name);
  if (row.contains("fixture")) CheckKeys(row.at("fixture"), fixture_keys, name + ": fixture");
  if (row.contains("after_open")) {
    std::set<std::string> change_keys = fixture_keys;
    change_keys.insert(
        {"replace", "old_state", "resize_region", "publish_while_waiting", "publish_delay_ms"});
    const json& change = row.at("after_open");
    CheckKeys(change, change_keys, name + ": after_open");
    if (change.contains("publish_delay_ms") && !change.contains("publish_while_waiting")) {
      throw std::runtime_error(name + ": after_open has publish_delay_ms without the " +
                               "publish_while_waiting it delays");
    }
    if (change.contains("publish_while_waiting") && change.value("replace", false)) {
      throw std::runtime_error(name + ": after_open may publish_while_waiting or replace the " +
                               "segment, not both (which segment would it publish into?)");
    }
  }
  if (row.contains("take"))
    CheckKeys(row.at("take"), {"call", "count", "timeout_ms"}, name + ": take");
  // Every runner checks every one of these, and refuses a row whose expect has another.
  const std::set<std::string> expect_keys = {
      "stage",     "code",        "message_contains",   "count",
      "ids",       "refill_hint", "refill_request_min", "service_taken",
      "uncounted", "waiters"};
  CheckKeys(row.at("expect"), expect_keys, name + ": expect");
  CheckRegionExpect(row.at("expect"), name + ": expect");
  if (row.contains("expect_by_taker")) {
    CheckKeys(row.at("expect_by_taker"), {"cpp", "python", "go", "java", "node"},
              name + ": expect_by_taker");
    for (auto it = row.at("expect_by_taker").begin(); it != row.at("expect_by_taker").end(); ++it) {
      CheckKeys(it.value(), expect_keys, name + ": expect_by_taker." + it.key());
      CheckRegionExpect(it.value(), name + ": expect_by_taker." + it.key());
    }
    if (!row.contains("why") || !row.at("why").is_string() ||
        row.at("why").get<std::string>().size() < 20) {
      throw std::runtime_error(name +
                               ": expect_by_taker needs a \"why\" that says why this "
                               "taker differs (a sentence the runners print)");
    }
  }
}

}  // namespace

json Vocabulary() {
  namespace vocab = snowflake::vocab;
  using snowflake::shm::DaemonState;
  using snowflake::shm::ProducerHealth;
  using snowflake::shm::StateReason;
  json out = {{"errors", json::array()},  {"error_actions", json::array()},
              {"states", json::array()},  {"health", json::array()},
              {"reasons", json::array()}, {"reason_texts", json::array()}};
  for (uint32_t s = static_cast<uint32_t>(vocab::kFirstLibraryError);
       s <= static_cast<uint32_t>(vocab::kLastLibraryError); ++s) {
    const auto error = static_cast<vocab::ErrorCode>(s);
    out["errors"].push_back(std::string(vocab::ErrorName(error)));
    out["error_actions"].push_back(std::string(vocab::ActionCode(vocab::ActionOf(error))));
  }
  for (uint32_t s = 1; s <= static_cast<uint32_t>(DaemonState::kStopped); ++s) {
    out["states"].push_back(std::string(vocab::StateCode(static_cast<DaemonState>(s))));
  }
  for (uint32_t h = 0; h <= static_cast<uint32_t>(ProducerHealth::kDead); ++h) {
    out["health"].push_back(std::string(vocab::HealthCode(static_cast<ProducerHealth>(h))));
  }
  for (uint32_t r = 0; r < vocab::kReasons.size(); ++r) {
    out["reasons"].push_back(std::string(vocab::ReasonCode(static_cast<StateReason>(r))));
    out["reason_texts"].push_back(vocab::DescribeReason(static_cast<StateReason>(r), 5));
  }
  return out;
}

// A layout fact as JSON: numbers as numbers (kMagic needs all 64 bits: nlohmann prints a
// uint64_t exactly), enumerators as their values, names as strings.
template <typename T>
json LayoutValue(T value) {
  if constexpr (std::is_enum_v<T>) {
    return static_cast<std::underlying_type_t<T>>(value);
  } else if constexpr (std::is_convertible_v<T, std::string_view>) {
    return std::string(std::string_view(value));
  } else {
    return value;
  }
}

json Layout() {
  // Unqualified, so the keys are the names as segment_layout.h spells them.
  using namespace snowflake::shm;
  json out = json::object();
  // The key is the expression's own spelling (the preprocessor's #), so a key cannot name
  // one field while its value is another's: the name a taker's test prints is the C++ it
  // must read.
#define SNOWFLAKE_LAYOUT(expr) out[#expr] = LayoutValue(expr)
  // The ring file's header (LAYOUT.md §3), every field but the reserved ones.
  SNOWFLAKE_LAYOUT(sizeof(SegmentHeader));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, magic));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, version));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, header_size));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, capacity));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, segment_size));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, segment_id));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, slots_offset));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, epoch_unix_ms));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, machine));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, id_bits));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, tail));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, wake_seq));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, last_published_id));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, state));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, reason));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, reason_detail));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, heartbeat_mono_ns));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, pid));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, incarnation));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, published_total));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, drained_total));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, clock_pauses));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, fill_target));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, max_age_ms));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, liveness_ms));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, freshness_bound_ms));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, pid_namespace));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, boot_id_high));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, boot_id_low));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, status_text_seq));
  SNOWFLAKE_LAYOUT(offsetof(SegmentHeader, status_text));
  SNOWFLAKE_LAYOUT(kStatusTextBytes);
  SNOWFLAKE_LAYOUT(kStatusTextReadTries);
  // The state word's values (the vocabulary's states are their names, in this order).
  SNOWFLAKE_LAYOUT(DaemonState::kStarting);
  SNOWFLAKE_LAYOUT(DaemonState::kServing);
  SNOWFLAKE_LAYOUT(DaemonState::kPaused);
  SNOWFLAKE_LAYOUT(DaemonState::kOutOfService);
  SNOWFLAKE_LAYOUT(DaemonState::kStopped);
  // The consumer region (LAYOUT.md §4): its memfd, the service slots and their lanes.
  SNOWFLAKE_LAYOUT(kConsumerRegionSize);
  SNOWFLAKE_LAYOUT(kConsumerRegionSeals);
  SNOWFLAKE_LAYOUT(offsetof(ConsumerRegion, head));
  SNOWFLAKE_LAYOUT(offsetof(ConsumerRegion, refill_request));
  SNOWFLAKE_LAYOUT(offsetof(ConsumerRegion, refill_hint));
  SNOWFLAKE_LAYOUT(offsetof(ConsumerRegion, waiters));
  SNOWFLAKE_LAYOUT(offsetof(ConsumerRegion, uncounted));
  SNOWFLAKE_LAYOUT(offsetof(ConsumerRegion, segment_id));
  SNOWFLAKE_LAYOUT(offsetof(ConsumerRegion, services));
  SNOWFLAKE_LAYOUT(offsetof(ConsumerRegion, lanes));
  SNOWFLAKE_LAYOUT(kServiceSlotCount);
  SNOWFLAKE_LAYOUT(sizeof(ServiceSlot));  // the services' stride
  SNOWFLAKE_LAYOUT(offsetof(ServiceSlot, owner_pid));
  SNOWFLAKE_LAYOUT(offsetof(ServiceSlot, name_ready));
  SNOWFLAKE_LAYOUT(offsetof(ServiceSlot, taken));
  SNOWFLAKE_LAYOUT(offsetof(ServiceSlot, name));
  SNOWFLAKE_LAYOUT(sizeof(ServiceSlot::name));
  SNOWFLAKE_LAYOUT(kServiceNameMax);
  SNOWFLAKE_LAYOUT(kServiceSlotActive);
  SNOWFLAKE_LAYOUT(kServiceSlotRetired);
  SNOWFLAKE_LAYOUT(kLanesPerService);
  SNOWFLAKE_LAYOUT(sizeof(ConsumerRegion::lanes[0]));  // one service's lanes: their stride
  SNOWFLAKE_LAYOUT(sizeof(CounterLane));               // a lane's stride
  SNOWFLAKE_LAYOUT(offsetof(CounterLane, taken));
  // The ring file, its identity and the slots (LAYOUT.md §1-3, §5).
  SNOWFLAKE_LAYOUT(kSegmentFileName);
  SNOWFLAKE_LAYOUT(kMagic);
  SNOWFLAKE_LAYOUT(kVersion);
  SNOWFLAKE_LAYOUT(kPageSize);
  SNOWFLAKE_LAYOUT(kSlotsOffset);
  SNOWFLAKE_LAYOUT(kMinCapacity);
  SNOWFLAKE_LAYOUT(kMaxCapacity);
  // A slot holds an ID; a take reads its millisecond for the freshness rule by the header's
  // id_bits (PackIdBits: time, machine, sequence bits from the lowest byte).
  SNOWFLAKE_LAYOUT(PackIdBits(snowflake::kDefaultIdBits));
  SNOWFLAKE_LAYOUT(snowflake::kMinTimeBits);
  SNOWFLAKE_LAYOUT(snowflake::kMaxTimeBits);
  SNOWFLAKE_LAYOUT(snowflake::kMinMachineBits);
  SNOWFLAKE_LAYOUT(snowflake::kMaxMachineBits);
  SNOWFLAKE_LAYOUT(snowflake::kMinSequenceBits);
#undef SNOWFLAKE_LAYOUT
  return out;
}

// The region DIR's socket hands out, attached to as a taker does: its refill words, its
// waiters, its uncounted total, and the IDs taken per service, summed over the slots the
// daemon counts (RingProducer::ForEachService: claimed, and active or retired; `taken` plus
// the slot's lanes), so a taker that claims a slot but never marks it, or counts past its
// lanes, is seen as the daemon would see it.
json RegionWords(const std::string& dir) {
  auto attached = snowflake::protocol::Attach(dir, geteuid());
  if (!attached) Die("attach to " + dir + ": " + attached.error().message);
  void* base =
      mmap(nullptr, sizeof(ConsumerRegion), PROT_READ, MAP_SHARED, attached->region.get(), 0);
  if (base == MAP_FAILED) Die(std::string("map the region: ") + std::strerror(errno));
  const auto* region = static_cast<const ConsumerRegion*>(base);
  json services = json::object();
  for (size_t i = 0; i < snowflake::shm::kServiceSlotCount; ++i) {
    const ServiceSlot& slot = region->services[i];
    const uint64_t ready = slot.name_ready.load(std::memory_order_acquire);
    if (slot.owner_pid.load(std::memory_order_acquire) == 0 ||
        (ready != snowflake::shm::kServiceSlotActive &&
         ready != snowflake::shm::kServiceSlotRetired)) {
      continue;
    }
    uint64_t taken = slot.taken.load(std::memory_order_relaxed);
    for (const CounterLane& lane : region->lanes[i]) {
      taken += lane.taken.load(std::memory_order_relaxed);
    }
    const std::string name = NameOf(slot);
    services[name] = services.value(name, uint64_t{0}) + taken;
  }
  json out = {{"refill_request", region->refill_request.load()},
              {"refill_hint", region->refill_hint.load()},
              {"waiters", region->waiters.load()},
              {"uncounted", region->uncounted.load()},
              {"service_taken", services}};
  munmap(base, sizeof(ConsumerRegion));
  return out;
}

// after_open's publish_while_waiting: N IDs published into the ring file as the daemon
// publishes (LAYOUT.md §7, Publish steps 4-7 and Wake), by a process it leaves behind, once
// a taker is inside a wait (the region's `waiters` is non-zero, as Wait step 4 makes it)
// and `publish_delay_ms` more have passed, so the taker is asleep on wake_seq when they
// come. A taker that never counts itself in `waiters` is never woken by a daemon, which
// wakes only when it is non-zero; here it is published nothing, and its row times out.
// The process gives up when the live pid exits or after 60 s. Returns the IDs, which are
// stamped with the time of this call: the row's freshness bound must cover the wait.
std::vector<uint64_t> PublishWhileWaiting(const std::string& dir, const json& change,
                                          uint64_t live_pid) {
  const json& count = change.at("publish_while_waiting");
  const json& delay = change.value("publish_delay_ms", json(50));
  if (!IsCount(delay) || delay.get<uint64_t>() > 10'000) {
    Die("publish_delay_ms: " + delay.dump() + " is not a number of milliseconds from 0 to 10000");
  }
  const std::string ring_path = dir + "/" + std::string(snowflake::shm::kSegmentFileName);
  const snowflake::UniqueFd ring_fd(open(ring_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  struct stat info {};
  if (!ring_fd || fstat(ring_fd.get(), &info) != 0) Die("open " + ring_path + " to publish");
  const auto ring_bytes = static_cast<size_t>(info.st_size);
  void* ring_base = mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd.get(), 0);
  if (ring_base == MAP_FAILED) Die(std::string("map the ring file: ") + std::strerror(errno));
  auto* header = static_cast<SegmentHeader*>(ring_base);
  auto* slots = reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(ring_base) +
                                                         snowflake::shm::kSlotsOffset);
  auto attached = snowflake::protocol::Attach(dir, geteuid());
  if (!attached) Die("attach to " + dir + ": " + attached.error().message);
  void* region_base =
      mmap(nullptr, sizeof(ConsumerRegion), PROT_READ, MAP_SHARED, attached->region.get(), 0);
  if (region_base == MAP_FAILED) Die(std::string("map the region: ") + std::strerror(errno));
  const auto* region = static_cast<const ConsumerRegion*>(region_base);

  const uint64_t capacity = header->capacity.load(std::memory_order_relaxed);
  const uint64_t tail = header->tail.load(std::memory_order_relaxed);
  const uint64_t head = region->head.load(std::memory_order_acquire);
  const uint64_t room = capacity - (tail - head);
  if (!IsCount(count) || count.get<uint64_t>() == 0 || count.get<uint64_t>() > room) {
    Die("publish_while_waiting: " + count.dump() + " is not a number of IDs from 1 to " +
        std::to_string(room) + " (the ring's free slots)");
  }
  const int64_t now_ms = static_cast<int64_t>(Clock(CLOCK_REALTIME) / 1'000'000);
  // In the layout the header records (the row's).
  const snowflake::IdLayout layout =
      snowflake::IdLayout::Create(
          kEpochUnixMs,
          snowflake::shm::UnpackIdBits(header->id_bits.load(std::memory_order_relaxed)))
          .value();
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < count.get<uint64_t>(); ++i) {
    ids.push_back(layout.EncodeUnchecked(now_ms - static_cast<int64_t>(kEpochUnixMs),
                                         kMachine & layout.max_machine(),
                                         static_cast<uint32_t>(tail + i) & layout.max_sequence()));
  }
  const pid_t child = fork();
  if (child < 0) Die("fork");
  if (child > 0) return ids;
  // The publisher: out of the runner's process group and off its pipes, as the server.
  setsid();
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  dup2(null, 0);
  dup2(null, 1);
  dup2(null, 2);
  const uint64_t started = Clock(CLOCK_MONOTONIC);
  while (region->waiters.load(std::memory_order_seq_cst) == 0) {
    if (kill(static_cast<pid_t>(live_pid), 0) != 0 && errno == ESRCH) _exit(0);
    if (Clock(CLOCK_MONOTONIC) - started > 60'000'000'000ull) _exit(0);
    usleep(200);
  }
  usleep(static_cast<useconds_t>(delay.get<uint64_t>() * 1000));
  for (size_t i = 0; i < ids.size(); ++i) {
    slots[(tail + i) & (capacity - 1)].store(ids[i], std::memory_order_relaxed);
  }
  header->last_published_id.store(ids.back(), std::memory_order_release);
  header->tail.store(tail + ids.size(), std::memory_order_release);
  header->published_total.fetch_add(ids.size(), std::memory_order_relaxed);
  header->wake_seq.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header->wake_seq), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
  _exit(0);
}

// after_open's resize_region: what any process holding the region might try, with the
// descriptor a taker gets. Its seals must refuse every attempt; one that works is the row's
// failure, said here.
void ResizeRegion(const std::string& dir, const json& size) {
  auto attached = snowflake::protocol::Attach(dir, geteuid());
  if (!attached) Die("attach to " + dir + ": " + attached.error().message);
  const int fd = attached->region.get();
  const auto bytes = size.get<off_t>();
  if (ftruncate(fd, bytes) == 0)
    Die("resize_region: ftruncate to " + std::to_string(bytes) + " worked");
  if (errno != EPERM) Die(std::string("resize_region: ftruncate: ") + std::strerror(errno));
  if (fallocate(fd, 0, 0, static_cast<off_t>(snowflake::shm::kConsumerRegionSize) * 2) == 0) {
    Die("resize_region: fallocate past the end worked");
  }
  if (errno != EPERM) Die(std::string("resize_region: fallocate: ") + std::strerror(errno));
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--region-words" && std::string(argv[2]) == "--dir") {
    std::cout << RegionWords(argv[3]).dump() << "\n";
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--vocabulary") {
    std::cout << Vocabulary().dump() << "\n";
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--layout") {
    std::cout << Layout().dump() << "\n";
    return 0;
  }
  std::string cases_path, name, dir;
  uint64_t live_pid = 0;
  bool after_open = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--cases") cases_path = next();
    else if (arg == "--case") name = next();
    else if (arg == "--dir") dir = next();
    else if (arg == "--live-pid") live_pid = std::stoull(next());
    else if (arg == "--after-open") after_open = true;
    else Die("unknown argument " + arg);
  }
  if (cases_path.empty() || name.empty() || dir.empty() || live_pid == 0) {
    Die("usage: conformance_fixture --cases FILE --case NAME --dir DIR --live-pid PID [--after-open]");
  }
  try {
    std::ifstream in(cases_path);
    const json table = json::parse(in);
    const json* row = nullptr;
    for (const json& c : table.at("cases")) {
      if (c.at("name") == name) row = &c;
    }
    if (row == nullptr) Die("no case " + name + " in " + cases_path);
    CheckRow(table, *row);
    const json fixture = Merged(table.at("defaults"), row->value("fixture", json::object()));
    std::vector<uint64_t> ids;
    if (!after_open) {
      ids = WriteSegment(dir, fixture, live_pid, 0x5e6d000000000001, false);
    } else {
      const json change = row->at("after_open");
      const std::string ring_path = dir + "/" + std::string(snowflake::shm::kSegmentFileName);
      if (change.contains("resize_region")) ResizeRegion(dir, change.at("resize_region"));
      if (change.contains("publish_while_waiting")) {
        ids = PublishWhileWaiting(dir, change, live_pid);
      }
      if (change.value("replace", false)) {
        // The old segment says why it is left (a daemon retiring it sets stopped) ...
        const int fd = open(ring_path.c_str(), O_WRONLY | O_CLOEXEC);
        const uint32_t state = change.value("old_state", 5u);
        if (fd < 0 || pwrite(fd, &state, sizeof state, offsetof(SegmentHeader, state)) != 4) {
          Die("mark the old segment");
        }
        close(fd);
        // ... and a new pair is renamed over its paths.
        json next = fixture;
        for (auto it = change.begin(); it != change.end(); ++it) {
          if (it.key() != "replace" && it.key() != "old_state") next[it.key()] = it.value();
        }
        next["state"] = 2;
        ids = WriteSegment(dir, next, live_pid, 0x5e6d000000000002, true);
      }
    }
    json out = {{"ids", json::array()}};
    for (uint64_t id : ids) out["ids"].push_back(std::to_string(id));
    std::cout << out.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    Die(e.what());
  }
}

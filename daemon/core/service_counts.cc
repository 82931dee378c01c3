#include "daemon/core/service_counts.h"

#include <signal.h>

#include <cerrno>
#include <vector>

#include "daemon/core/service_names.h"

namespace snowflake::daemon {

void ServiceCounts::Scan(shm::RingProducer& producer) {
  std::map<std::string, uint64_t> live;
  std::vector<shm::ServiceCount> finished;
  producer.ForEachService([&](const shm::ServiceCount& c) {
    const bool dead = !c.retired && kill(static_cast<pid_t>(c.pid), 0) != 0 && errno == ESRCH;
    if (c.retired || dead) {
      finished.push_back(c);
    } else {
      AddServiceCount(live, c.name, c.taken);  // names from shared memory: untrusted
    }
  });
  for (const auto& c : finished) {
    // Fold a finished client's final count into its service's total, then free the slot.
    if (producer.FreeServiceSlot(c.slot, c.pid)) AddServiceCount(folded_, c.name, c.taken);
  }
  totals_ = folded_;
  for (const auto& [name, taken] : live) AddShownServiceCount(totals_, name, taken);
}

void ServiceCounts::FoldAll(const shm::RingProducer& producer) {
  producer.ForEachService(
      [&](const shm::ServiceCount& c) { AddServiceCount(folded_, c.name, c.taken); });
  totals_ = folded_;
}

}  // namespace snowflake::daemon

package snowflake

// Counting takes for the daemon's per-service totals (LAYOUT.md §4, ServiceSlot).
//
// The trade-off. A take is the C++ take: load head, load tail, load the slot, check its
// freshness, CAS head. Counting it in the shared segment on every take would add a second
// read-modify-write on a word every goroutine of the process shares (and the daemon
// reads): under concurrency that line moves between cores on every take, as head's does.
// A Go program cannot own a thread, so the layout's per-thread lanes do not fit it either.
// Instead a take adds to a shard in plain process memory: one of countShards
// cache-line-padded counters, picked by a hash of the calling goroutine's stack address
// (goroutines' stacks are disjoint, so goroutines running at once rarely share a shard;
// one that does only shares a line, the count stays exact). A background goroutine per
// Client adds what the shards gained to the service slot's `taken` word (or to `uncounted`
// when every slot was in use) every publishEvery, and Close publishes the rest before it
// retires the slot. So:
//   - the word the daemon reads is at most about publishEvery behind while the Client is
//     open, and exact once Close returns;
//   - a process that dies without Close (SIGKILL) loses the last publishEvery of its count
//     (IDs are never affected: counts are statistics);
//   - the Client's own count (Status.ClientTaken) is the shards' sum: never behind;
//   - a take running beside Close may count after the last publish: that count is lost,
//     as before.

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

const (
	countShardBits = 6
	countShards    = 1 << countShardBits
	publishEvery   = 10 * time.Millisecond
)

// countShard is alone on its cache line (and the next, against the adjacent-line
// prefetcher: 128 bytes).
type countShard struct {
	n atomic.Uint64
	_ [120]byte
}

// takeCount is one attachment's count of the IDs taken through it.
type takeCount struct {
	shards [countShards]countShard
	word   *uint64  // in the consumer region: the slot's `taken`, or `uncounted`
	seg    *segment // keeps word's mapping alive while the count is published

	mu        sync.Mutex // serializes publish
	published uint64     // the part of the sum already added to word; guarded by mu
}

// shardIndex is the calling goroutine's shard: a multiplicative hash of an address on its
// stack. Stacks are at least 2 KiB and disjoint, so the address shifted by 11 differs
// between goroutines; a stack that grows moves, which only moves its shard.
func shardIndex() uint {
	var marker byte
	a := uint64(uintptr(unsafe.Pointer(&marker)))
	return uint((a >> 11) * 0x9e3779b97f4a7c15 >> (64 - countShardBits))
}

func (k *takeCount) add(n uint64) { k.shards[shardIndex()].n.Add(n) }

// sum is every ID counted so far.
func (k *takeCount) sum() uint64 {
	var total uint64
	for i := range k.shards {
		total += k.shards[i].n.Load()
	}
	return total
}

// publish adds what the shards gained since the last publish to the segment's word.
func (k *takeCount) publish() {
	k.mu.Lock()
	if total := k.sum(); total != k.published {
		atomic.AddUint64(k.word, total-k.published)
		k.published = total
	}
	k.mu.Unlock()
	runtime.KeepAlive(k.seg)
}

// publisher publishes a Client's counts every publishEvery until close. It refers to the
// counts and their segments, never to the Client, so a Client dropped without Close can
// still be collected (its finalizer closes it, which stops the goroutine).
type publisher struct {
	mu     sync.Mutex
	counts []*takeCount // guarded by mu
	stop   chan struct{}
	done   chan struct{}
}

func startPublisher() *publisher {
	p := &publisher{stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *publisher) run() {
	defer close(p.done)
	ticker := time.NewTicker(publishEvery)
	defer ticker.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-ticker.C:
			p.publishAll()
		}
	}
}

func (p *publisher) add(k *takeCount) {
	p.mu.Lock()
	p.counts = append(p.counts, k)
	p.mu.Unlock()
}

func (p *publisher) publishAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range p.counts {
		k.publish()
	}
}

// close stops the goroutine and publishes what is left.
func (p *publisher) close() {
	close(p.stop)
	<-p.done
	p.publishAll()
}

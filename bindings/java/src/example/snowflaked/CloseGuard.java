package example.snowflaked;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;

/**
 * Keeps a client's native handle alive while calls use it: calls {@link #enter()} and
 * {@link #exit(Lane)} around each use, {@link #close()} marks the client closed and waits
 * until no call is inside. A read-write lock would do the same with two atomic
 * read-modify-writes per call on one shared word; this costs one store with a full fence
 * and one plain store, each on a word of the calling thread's own.
 *
 * <p>Each thread that calls in gets a lane (its own {@code busy} word, registered once).
 * The proof is Dekker's: a call writes busy = 1 and then reads closed; close writes closed
 * and then reads every lane's busy. Both are volatile (sequentially consistent), so either
 * the call sees closed (and leaves without touching the handle) or close sees busy = 1
 * (and waits until the call's exit writes 0). A lane is registered, by a volatile write of
 * the lane list, before its first busy store, so close's read of the list after its write
 * of closed finds every lane a call it must wait for uses.
 *
 * <p>Lanes of threads that have ended are dropped when the list has doubled since the last
 * sweep, so threads that come and go (pools, virtual threads) do not grow it without
 * bound; a thread ends only outside a call, so its lane is idle.
 */
final class CloseGuard {
  static final class Lane {
    volatile int busy;
    final WeakReference<Thread> owner = new WeakReference<>(Thread.currentThread());
  }

  private static final VarHandle BUSY;

  static {
    try {
      BUSY = MethodHandles.lookup().findVarHandle(Lane.class, "busy", int.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final ThreadLocal<Lane> lanes = ThreadLocal.withInitial(this::register);
  // Every registered lane. Replaced (copy on write) under `this`; read without a lock.
  private volatile Lane[] all = new Lane[0];
  private int sweepAt = 64;  // guarded by this
  private volatile boolean closed;

  private synchronized Lane register() {
    Lane lane = new Lane();
    List<Lane> next = new ArrayList<>(all.length + 1);
    for (Lane other : all) {
      if (all.length < sweepAt || other.owner.get() != null) next.add(other);
    }
    if (all.length >= sweepAt) sweepAt = Math.max(64, 2 * next.size());
    next.add(lane);
    all = next.toArray(new Lane[0]);
    return lane;
  }

  /** Lanes registered (for tests). */
  int laneCount() {
    return all.length;
  }

  /** Whether close() has begun (for the tests of the client's Cleaner). */
  boolean isClosed() {
    return closed;
  }

  /** Marks this thread inside a call; null if the client is closed (the caller throws). */
  Lane enter() {
    Lane lane = lanes.get();
    lane.busy = 1;  // volatile: ordered before the read of closed (StoreLoad)
    if (closed) {
      BUSY.setRelease(lane, 0);
      return null;
    }
    return lane;
  }

  /** Leaves the call; the release orders the call's use of the handle before it. */
  static void exit(Lane lane) {
    BUSY.setRelease(lane, 0);
  }

  /**
   * Marks the guard closed and waits until no call is inside. Returns false if it was
   * closed already. Must not be called from inside a call on the same thread.
   */
  boolean close() {
    synchronized (this) {
      if (closed) return false;
      closed = true;
    }
    for (Lane lane : all) {
      for (int spins = 0; lane.busy != 0; spins++) {
        if (spins < 100) {
          Thread.onSpinWait();
        } else {
          Thread.yield();
        }
      }
    }
    return true;
  }
}

// snowflake.node: the compiled half of the Node.js package `snowflaked` (index.js is the
// other half: SnowflakeError, the option checks, Dates and the status object's names).
//
// A Client holds two snowflake::Clients of one service, because the event loop must
// never wait long:
//   - the sync one (next, nextString, nextBatch, nextBatchInto) waits on an empty ring at most
//     syncWaitMs (then ring_empty: retry here) and never asks remotes (an HTTP round trip
//     is no bounded wait); a paused, stopped or dead daemon fails it at once, as every take
//     does;
//   - the async one (nextAsync, nextBatchAsync) runs on libuv's worker threads with the
//     full timeoutMs and the remotes; it is opened on a worker at its first use.
// Both live in a Native shared by the JavaScript object and every worker in flight, so
// close() while a worker still takes frees nothing under it: the last holder frees.
//
// Each JavaScript thread (worker_threads) loads the addon into its own environment: the
// error class is per environment (instance data).

#include <napi.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "libclient/status/status_report.h"
#include "protocol/control_client.h"
#include "protocol/vocabulary.h"
#include "snowflake/client.h"
#include "snowflake/client_error.h"
#include "snowflake/id_layout.h"
#include "snowflake/snowflake.h"

namespace {

// A batch larger than this is refused: 16 M IDs are 128 MiB, beyond any sensible request.
constexpr int64_t kMaxBatch = int64_t{1} << 24;
constexpr std::chrono::milliseconds kStatusTimeout{2000};

// Per JavaScript environment (main thread or worker thread).
struct AddonData {
  Napi::FunctionReference error_class;  // index.js's SnowflakeError, set by _init
};

// A SnowflakeError(message, code), or a plain Error before index.js registered the class
// (only if the addon is loaded without index.js).
Napi::Error MakeError(Napi::Env env, std::string_view code, const std::string& message) {
  auto* data = env.GetInstanceData<AddonData>();
  if (data == nullptr || data->error_class.IsEmpty()) {
    return Napi::Error::New(env, std::string(code) + ": " + message);
  }
  Napi::Object error = data->error_class.New(
      {Napi::String::New(env, message), Napi::String::New(env, code.data(), code.size())});
  return Napi::Error(env, error);
}

Napi::Error MakeError(Napi::Env env, const snowflake::Error& error) {
  return MakeError(env, snowflake::ClientErrorName(error.code), error.message);
}

Napi::Error InvalidArgument(Napi::Env env, const std::string& message) {
  return MakeError(env, sf_status_str(SF_INVALID_ARGUMENT), message);
}

// What a Client shares with the workers that run its async calls.
class Native {
 public:
  // `has_remotes`: a missing local daemon is no error at open (the async calls fail over).
  Native(std::string service, snowflake::ClientOptions sync_options,
         snowflake::ClientOptions async_options, bool has_remotes)
      : service_(std::move(service)),
        sync_options_(std::move(sync_options)),
        async_options_(std::move(async_options)),
        has_remotes_(has_remotes) {}

  // open(): the sync client, or the error open() reports. On the JavaScript thread, or on
  // openAsync()'s worker before the Client is handed to JavaScript.
  std::optional<snowflake::Error> Open() {
    auto opened = OpenSync();
    // With remotes, no local daemon is no error: the async calls take from the remotes
    // (and check their options when they first open).
    if (opened ||
        (has_remotes_ && opened.error().code == snowflake::ClientError::kDaemonNotRunning)) {
      return std::nullopt;
    }
    return std::move(opened.error());
  }

  // On the JavaScript thread only (open): the sync client, or why there is none.
  tl::expected<void, snowflake::Error> OpenSync() {
    auto opened = snowflake::Client::Open(service_, sync_options_);
    if (!opened) return tl::unexpected(std::move(opened.error()));
    sync_.emplace(std::move(*opened));
    return {};
  }

  // The sync client: opened by open(); with remotes and no local daemon then, opened
  // again on each sync call until a segment appears (a stat and an mmap, bounded).
  tl::expected<snowflake::Client*, snowflake::Error> Sync() {
    if (sync_) [[likely]]
      return &*sync_;
    if (auto opened = OpenSync(); !opened) {
      snowflake::Error error = std::move(opened.error());
      error.message +=
          " (the sync calls take from the local daemon only; nextAsync() and "
          "nextBatchAsync() fail over to the remotes)";
      return tl::unexpected(std::move(error));
    }
    return &*sync_;
  }

  // On a worker thread: the async client, opened at its first use.
  tl::expected<snowflake::Client*, snowflake::Error> Async() {
    std::lock_guard lock(async_mutex_);
    if (!async_) {
      auto opened = snowflake::Client::Open(service_, async_options_);
      if (!opened) return tl::unexpected(std::move(opened.error()));
      async_.emplace(std::move(*opened));
    }
    return &*async_;
  }

  // IDs the async client took (0 before it is opened). Any thread.
  uint64_t AsyncTaken() {
    std::lock_guard lock(async_mutex_);
    if (!async_) return 0;
    auto status = async_->GetStatus();
    return status ? status->client_taken : 0;
  }

  std::filesystem::path runtime_dir() const {
    return sync_options_.runtime_dir.empty() ? snowflake::DefaultRuntimeDir()
                                             : sync_options_.runtime_dir;
  }
  const std::string& service() const { return service_; }

 private:
  // Constant after construction.
  const std::string service_;
  const snowflake::ClientOptions sync_options_;
  const snowflake::ClientOptions async_options_;
  const bool has_remotes_;
  // Touched on the JavaScript thread only (or by openAsync()'s worker, before the Client
  // reaches JavaScript).
  std::optional<snowflake::Client> sync_;
  // Opened under async_mutex_ by the first worker; then used by workers concurrently
  // (a snowflake::Client is thread-safe).
  std::mutex async_mutex_;
  std::optional<snowflake::Client> async_;
};

// n IDs from `client` into ids, taking again after short batches. An error after some IDs
// were taken keeps those: *got says how many (taken IDs are never thrown away); the error
// is returned only when none was taken.
std::optional<snowflake::Error> TakeUpTo(snowflake::Client& client, uint64_t* ids, size_t n,
                                         size_t* got) {
  *got = 0;
  while (*got < n) {
    auto taken = client.NextBatch(std::span<uint64_t>(ids + *got, n - *got));
    if (!taken) {
      if (*got > 0) return std::nullopt;
      return std::move(taken.error());
    }
    *got += *taken;
  }
  return std::nullopt;
}

// What every async call shares: its promise, and the Native it holds until it settles on
// the JavaScript thread (so a close() that came meanwhile frees it there, never on a
// worker). A failure of the worker itself rejects the promise.
class PromiseWorker : public Napi::AsyncWorker {
 public:
  Napi::Promise promise() const { return deferred_.Promise(); }

 protected:
  PromiseWorker(Napi::Env env, const char* name, std::shared_ptr<Native> native)
      : Napi::AsyncWorker(env, name),
        deferred_(Napi::Promise::Deferred::New(env)),
        native_(std::move(native)) {}

  void OnError(const Napi::Error& error) override {
    native_.reset();
    deferred_.Reject(error.Value());
  }

  Napi::Promise::Deferred deferred_;
  std::shared_ptr<Native> native_;
};

// nextAsync / nextBatchAsync: n IDs on a worker thread with the full timeout.
class TakeWorker : public PromiseWorker {
 public:
  TakeWorker(Napi::Env env, std::shared_ptr<Native> native, size_t n, bool single)
      : PromiseWorker(env, "snowflaked.take", std::move(native)),
        ids_(n),
        single_(single) {}

 protected:
  void Execute() override {
    auto client = native_->Async();
    if (!client) {
      failed_ = std::move(client.error());
      return;
    }
    size_t got = 0;
    failed_ = TakeUpTo(**client, ids_.data(), ids_.size(), &got);
    ids_.resize(got);
  }

  void OnOK() override {
    // Every worker lets go of the Native here, on the JavaScript thread, so a close()
    // that came meanwhile frees it now and never on a worker.
    native_.reset();
    Napi::Env env = Env();
    // The promise is settled whatever happens here (an ArrayBuffer that cannot be made):
    // a caller never waits on one that nothing will settle.
    try {
      if (failed_) {
        deferred_.Reject(MakeError(env, *failed_).Value());
        return;
      }
      if (single_) {
        deferred_.Resolve(Napi::BigInt::New(env, ids_[0]));
        return;
      }
      Napi::ArrayBuffer buffer = Napi::ArrayBuffer::New(env, ids_.size() * sizeof(uint64_t));
      std::memcpy(buffer.Data(), ids_.data(), ids_.size() * sizeof(uint64_t));
      deferred_.Resolve(
          Napi::TypedArrayOf<uint64_t>::New(env, ids_.size(), buffer, 0, napi_biguint64_array));
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    } catch (const std::exception& e) {
      deferred_.Reject(Napi::Error::New(env, e.what()).Value());
    }
  }

 private:
  std::vector<uint64_t> ids_;
  const bool single_;
  std::optional<snowflake::Error> failed_;
};

// openAsync(): the open on a worker thread. Its error path looks the segment's group up
// (getgrgid, for the "add this user to group ..." advice), which NSS may answer from the
// network: the event loop never waits for it.
class OpenWorker : public PromiseWorker {
 public:
  OpenWorker(Napi::Env env, std::shared_ptr<Native> native)
      : PromiseWorker(env, "snowflaked.open", std::move(native)) {}

 protected:
  void Execute() override { failed_ = native_->Open(); }

  void OnOK() override {
    native_.reset();
    Napi::Env env = Env();
    if (failed_) {
      deferred_.Reject(MakeError(env, *failed_).Value());
    } else {
      deferred_.Resolve(env.Undefined());
    }
  }

 private:
  std::optional<snowflake::Error> failed_;
};

// status(): the object `snowflakectl status --json` prints for the client's runtime
// directory (the segment's view, read on the JavaScript thread, plus the daemon's answer
// on its control socket, asked here on a worker), with client_taken: the IDs this Client
// took. As JSON text; index.js names its keys as JavaScript does.
class StatusWorker : public PromiseWorker {
 public:
  StatusWorker(Napi::Env env, std::shared_ptr<Native> native, snowflake::ClientStatus segment)
      : PromiseWorker(env, "snowflaked.status", std::move(native)) {
    report_.segment = std::move(segment);
  }

 protected:
  void Execute() override {
    const std::filesystem::path dir = native_->runtime_dir();
    report_.runtime_dir = dir.string();
    snowflake::status::SetDaemonAnswer(report_,
                                       snowflake::protocol::QueryStatus(dir, kStatusTimeout));
    report_.now_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    nlohmann::json out = snowflake::status::StatusToJson(report_);
    out["client_taken"] = report_.segment.client_taken + native_->AsyncTaken();
    json_ = snowflake::protocol::Dump(out);
  }

  void OnOK() override {
    native_.reset();
    deferred_.Resolve(Napi::String::New(Env(), json_));
  }

 private:
  snowflake::status::StatusReport report_;
  std::string json_;
};

// Reads optional member `name` of `options` as a string; absent or undefined: nullopt.
std::optional<std::string> OptionalString(const Napi::Object& options, const char* name) {
  Napi::Value value = options.Get(name);
  if (value.IsUndefined() || value.IsNull()) return std::nullopt;
  if (!value.IsString()) {
    throw Napi::TypeError::New(options.Env(), std::string(name) + " must be a string");
  }
  return value.As<Napi::String>().Utf8Value();
}

// The largest millisecond option (index.js's MAX_MS).
constexpr uint32_t kMaxOptionMs = 0xffffffff;

uint32_t Milliseconds(const Napi::Object& options, const char* name, uint32_t fallback) {
  Napi::Value value = options.Get(name);
  if (value.IsUndefined()) return fallback;
  if (!value.IsNumber()) {
    throw Napi::TypeError::New(options.Env(), std::string(name) + " must be a number");
  }
  // The addon's Client is reachable without index.js: it checks the range again, so no
  // -1 or NaN becomes a wait of 49 days on the event loop.
  const double ms = value.As<Napi::Number>().DoubleValue();
  if (!(ms >= 0 && ms <= kMaxOptionMs) || ms != static_cast<double>(static_cast<int64_t>(ms))) {
    throw Napi::RangeError::New(options.Env(), std::string(name) +
                                                   " must be a whole number of milliseconds "
                                                   "from 0 to " +
                                                   std::to_string(kMaxOptionMs));
  }
  return static_cast<uint32_t>(ms);
}

// What a Client's JavaScript object and its bound sync calls share: the Native, until
// close() lets go of it. Touched on the JavaScript thread only.
struct Handle {
  std::shared_ptr<Native> native;
};

Native& Live(Napi::Env env, Handle& handle) {
  if (!handle.native) [[unlikely]]
    throw InvalidArgument(env, "the client is closed: open a new one");
  return *handle.native;
}

snowflake::Client& SyncClient(Napi::Env env, Handle& handle) {
  auto client = Live(env, handle).Sync();
  if (!client) [[unlikely]]
    throw MakeError(env, client.error());
  return **client;
}

Napi::Value TakeOne(Napi::Env env, Handle& handle) {
  auto id = SyncClient(env, handle).Next();
  if (!id) [[unlikely]]
    throw MakeError(env, id.error());
  return Napi::BigInt::New(env, *id);
}

Napi::Value TakeOneString(Napi::Env env, Handle& handle) {
  auto id = SyncClient(env, handle).Next();
  if (!id) [[unlikely]]
    throw MakeError(env, id.error());
  char text[24];
  const auto end = std::to_chars(text, text + sizeof text, *id).ptr;
  return Napi::String::New(env, text, static_cast<size_t>(end - text));
}

size_t BatchSize(const Napi::CallbackInfo& info, const char* call) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    throw Napi::TypeError::New(env, std::string(call) + "(n): n must be a number");
  }
  const double n = info[0].As<Napi::Number>().DoubleValue();
  if (!(n >= 1 && n <= static_cast<double>(kMaxBatch)) ||
      n != static_cast<double>(static_cast<int64_t>(n))) {
    throw Napi::RangeError::New(
        env, std::string(call) + "(n): n must be a whole number from 1 to " +
                 std::to_string(kMaxBatch) + ", not " + info[0].ToString().Utf8Value());
  }
  return static_cast<size_t>(n);
}

// Up to n IDs: what the ring holds now (at least 1), waiting at most syncWaitMs when it
// is empty. A short array is no error: call again for more.
Napi::Value TakeBatch(const Napi::CallbackInfo& info, Handle& handle) {
  Napi::Env env = info.Env();
  // One take returns at most what a ring holds: no larger buffer on the event loop.
  const size_t n = std::min<size_t>(BatchSize(info, "nextBatch"), snowflake::shm::kMaxCapacity);
  snowflake::Client& client = SyncClient(env, handle);
  Napi::ArrayBuffer buffer = Napi::ArrayBuffer::New(env, n * sizeof(uint64_t));
  auto taken = client.NextBatch(std::span<uint64_t>(static_cast<uint64_t*>(buffer.Data()), n));
  if (!taken) [[unlikely]]
    throw MakeError(env, taken.error());
  return Napi::TypedArrayOf<uint64_t>::New(env, *taken, buffer, 0, napi_biguint64_array);
}

// nextBatch() into the caller's BigUint64Array (a subarray gives an offset): 1 to its
// length IDs from its index 0, the count returned. Nothing is allocated, so a caller that
// keeps one array pays for the take alone; a fresh 8 KB ArrayBuffer costs V8 about as much
// as taking the 1,000 IDs it holds (bench/README.md).
Napi::Value TakeBatchInto(const Napi::CallbackInfo& info, Handle& handle) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsTypedArray() ||
      info[0].As<Napi::TypedArray>().TypedArrayType() != napi_biguint64_array) {
    throw Napi::TypeError::New(
        env, "nextBatchInto(into): into must be a BigUint64Array (new BigUint64Array(n))");
  }
  auto into = info[0].As<Napi::TypedArrayOf<uint64_t>>();
  const size_t n = into.ElementLength();
  if (n < 1 || n > static_cast<size_t>(kMaxBatch)) {
    throw Napi::RangeError::New(env, "nextBatchInto(into): into must hold 1 to " +
                                         std::to_string(kMaxBatch) + " IDs, not " +
                                         std::to_string(n));
  }
  snowflake::Client& client = SyncClient(env, handle);
  auto taken = client.NextBatch(std::span<uint64_t>(into.Data(), n));
  if (!taken) [[unlikely]]
    throw MakeError(env, taken.error());
  return Napi::Number::New(env, static_cast<double>(*taken));
}

// The sync calls as plain functions bound to a Handle (their data): a call of one costs
// what any N-API function call costs, where a method of an ObjectWrap class costs about
// 100 ns more (the unwrap of `this`). index.js puts them on each client.
Handle& BoundHandle(const Napi::CallbackInfo& info) {
  return **static_cast<std::shared_ptr<Handle>*>(info.Data());
}
Napi::Value BoundNext(const Napi::CallbackInfo& info) {
  return TakeOne(info.Env(), BoundHandle(info));
}
Napi::Value BoundNextString(const Napi::CallbackInfo& info) {
  return TakeOneString(info.Env(), BoundHandle(info));
}
Napi::Value BoundNextBatch(const Napi::CallbackInfo& info) {
  return TakeBatch(info, BoundHandle(info));
}
Napi::Value BoundNextBatchInto(const Napi::CallbackInfo& info) {
  return TakeBatchInto(info, BoundHandle(info));
}

template <Napi::Function::Callback call>
Napi::Function Bind(Napi::Env env, const char* name, const std::shared_ptr<Handle>& handle) {
  auto* data = new std::shared_ptr<Handle>(handle);
  Napi::Function function = Napi::Function::New<call>(env, name, data);
  // Freed with the function: a function kept after its client was collected still
  // finds the Handle (and reports the client closed once close() ran).
  function.AddFinalizer([](Napi::Env, std::shared_ptr<Handle>* held) { delete held; }, data);
  return function;
}

uint64_t IdArgument(const Napi::Value& value);

// [unixMs, machine, sequence]: an ID's fields, as _decode and Client._decodeId return them.
Napi::Array FieldsArray(Napi::Env env, const snowflake::DecodedId& fields) {
  Napi::Array out = Napi::Array::New(env, 3);
  out.Set(0u, Napi::Number::New(env, static_cast<double>(fields.unix_ms)));
  out.Set(1u, Napi::Number::New(env, fields.machine));
  out.Set(2u, Napi::Number::New(env, fields.sequence));
  return out;
}

class Client : public Napi::ObjectWrap<Client> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Client",
                       {
                           InstanceMethod<&Client::Next>("next"),
                           InstanceMethod<&Client::NextString>("nextString"),
                           InstanceMethod<&Client::NextBatch>("nextBatch"),
                           InstanceMethod<&Client::NextBatchInto>("nextBatchInto"),
                           InstanceMethod<&Client::SyncCalls>("_syncCalls"),
                           InstanceMethod<&Client::NextAsync>("nextAsync"),
                           InstanceMethod<&Client::NextBatchAsync>("nextBatchAsync"),
                           InstanceMethod<&Client::StatusJson>("_statusJson"),
                           InstanceMethod<&Client::EpochUnixMs>("_epochUnixMs"),
                           InstanceMethod<&Client::DecodeId>("_decodeId"),
                           InstanceMethod<&Client::RingFill>("_ringFill"),
                           InstanceMethod<&Client::OpenAsync>("_openAsync"),
                           InstanceMethod<&Client::Close>("close"),
                           InstanceAccessor<&Client::Closed>("closed"),
                           InstanceAccessor<&Client::Service>("service"),
                       });
  }

  // new Client(service, options[, deferOpen]): options as index.js checked them (the names
  // of index.d.ts's ClientOptions; remotes already joined with commas). With deferOpen the
  // ring is not opened here: index.js's openAsync() calls _openAsync() before it hands the
  // Client out.
  explicit Client(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Client>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || !info[0].IsString() || !info[1].IsObject()) {
      throw Napi::TypeError::New(env, "Client(service: string, options: object)");
    }
    const bool defer_open = info.Length() > 2 && info[2].ToBoolean().Value();
    const std::string service = info[0].As<Napi::String>().Utf8Value();
    const Napi::Object options = info[1].As<Napi::Object>();
    snowflake::ClientOptions sync_options;
    if (auto dir = OptionalString(options, "runtimeDir")) sync_options.runtime_dir = *dir;
    sync_options.max_heartbeat_age =
        std::chrono::milliseconds(Milliseconds(options, "maxHeartbeatAgeMs", 0));
    snowflake::ClientOptions async_options = sync_options;
    sync_options.wait_timeout = std::chrono::milliseconds(Milliseconds(options, "syncWaitMs", 1));
    sync_options.remotes_from_environment = false;  // no HTTP on the event loop
    async_options.wait_timeout = std::chrono::milliseconds(Milliseconds(options, "timeoutMs", 100));
    const std::optional<std::string> remotes = OptionalString(options, "remotes");
    if (remotes) {
      std::string_view rest(*remotes);
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        if (comma != 0) async_options.remotes.emplace_back(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
      // remotes: "" (or []) means none, whatever $SNOWFLAKE_REMOTES says.
      async_options.remotes_from_environment = false;
    }
    if (auto ca = OptionalString(options, "remotesCa")) async_options.remotes_ca_file = *ca;
    if (auto cert = OptionalString(options, "remotesCert")) {
      async_options.remotes_cert_file = *cert;
    }
    if (auto key = OptionalString(options, "remotesKey")) async_options.remotes_key_file = *key;

    const bool has_remotes =
        !async_options.remotes.empty() ||
        (async_options.remotes_from_environment && std::getenv("SNOWFLAKE_REMOTES") != nullptr &&
         *std::getenv("SNOWFLAKE_REMOTES") != '\0');
    // What open() refuses before it looks at the runtime directory, openAsync() refuses
    // at once too.
    if (auto valid = snowflake::ValidateServiceName(service); !valid) {
      throw MakeError(env, valid.error());
    }
    handle_->native = std::make_shared<Native>(service, std::move(sync_options),
                                               std::move(async_options), has_remotes);
    service_ = service;
    if (defer_open) return;
    if (auto failed = handle_->native->Open()) throw MakeError(env, *failed);
  }

 private:
  Native& Live(Napi::Env env) { return ::Live(env, *handle_); }
  snowflake::Client& SyncClient(Napi::Env env) { return ::SyncClient(env, *handle_); }

  Napi::Value Next(const Napi::CallbackInfo& info) { return TakeOne(info.Env(), *handle_); }
  Napi::Value NextString(const Napi::CallbackInfo& info) {
    return TakeOneString(info.Env(), *handle_);
  }
  Napi::Value NextBatch(const Napi::CallbackInfo& info) { return TakeBatch(info, *handle_); }
  Napi::Value NextBatchInto(const Napi::CallbackInfo& info) {
    return TakeBatchInto(info, *handle_);
  }

  // {next, nextString, nextBatch, nextBatchInto} bound to this client, for index.js to put
  // on it.
  Napi::Value SyncCalls(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object calls = Napi::Object::New(env);
    calls.Set("next", Bind<BoundNext>(env, "next", handle_));
    calls.Set("nextString", Bind<BoundNextString>(env, "nextString", handle_));
    calls.Set("nextBatch", Bind<BoundNextBatch>(env, "nextBatch", handle_));
    calls.Set("nextBatchInto", Bind<BoundNextBatchInto>(env, "nextBatchInto", handle_));
    return calls;
  }

  Napi::Value NextAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Live(env);
    auto* worker = new TakeWorker(env, handle_->native, 1, true);
    Napi::Promise promise = worker->promise();
    worker->Queue();
    return promise;
  }

  // Exactly n IDs, taken on a worker thread with the full timeout.
  Napi::Value NextBatchAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const size_t n = BatchSize(info, "nextBatchAsync");
    Live(env);
    auto* worker = new TakeWorker(env, handle_->native, n, false);
    Napi::Promise promise = worker->promise();
    worker->Queue();
    return promise;
  }

  Napi::Value StatusJson(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto segment = SyncClient(env).GetStatus();
    if (!segment) throw MakeError(env, segment.error());
    auto* worker = new StatusWorker(env, handle_->native, std::move(*segment));
    Napi::Promise promise = worker->promise();
    worker->Queue();
    return promise;
  }

  // The epoch of this client's daemon (decode with it), in Unix ms.
  Napi::Value EpochUnixMs(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    return Napi::Number::New(env, static_cast<double>(SyncClient(env).layout().epoch_unix_ms()));
  }

  // _decodeId(id: bigint) -> [unixMs, machine, sequence] in this client's daemon's layout:
  // its segment's epoch and bits (Client::Decode), never the default's.
  Napi::Value DecodeId(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const uint64_t id = IdArgument(info[0]);
    auto fields = SyncClient(env).Decode(id);
    if (!fields) throw MakeError(env, fields.error());
    return FieldsArray(env, *fields);
  }

  // The IDs the ring holds now, read from the segment (no system call): the benchmark
  // waits on it between bursts, as bench/py_bench.py does.
  Napi::Value RingFill(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto status = SyncClient(env).GetStatus();
    if (!status) throw MakeError(env, status.error());
    return Napi::Number::New(env, static_cast<double>(status->ring_fill));
  }

  // The open of a Client made with deferOpen, on a worker: a promise of undefined, or
  // rejected with the open's error.
  Napi::Value OpenAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto* worker = new OpenWorker(env, handle_->native);
    Napi::Promise promise = worker->promise();
    worker->Queue();
    return promise;
  }

  // Idempotent. Async calls in flight keep the clients until they finish.
  Napi::Value Close(const Napi::CallbackInfo& info) {
    handle_->native.reset();
    return info.Env().Undefined();
  }

  Napi::Value Closed(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), handle_->native == nullptr);
  }

  Napi::Value Service(const Napi::CallbackInfo& info) {
    return Napi::String::New(info.Env(), service_);
  }

  const std::shared_ptr<Handle> handle_ = std::make_shared<Handle>();
  std::string service_;
};

uint64_t IdArgument(const Napi::Value& value) {
  Napi::Env env = value.Env();
  if (!value.IsBigInt()) throw Napi::TypeError::New(env, "an ID is a bigint");
  bool lossless = false;
  const uint64_t id = value.As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless || id >= (uint64_t{1} << 63)) {
    throw InvalidArgument(env,
                          value.ToString().Utf8Value() + " is no ID: IDs are between 0 and 2^63-1");
  }
  return id;
}

int64_t Int64Argument(const Napi::Value& value, const char* what) {
  if (!value.IsNumber()) {
    throw Napi::TypeError::New(value.Env(), std::string(what) + " must be a number (Unix ms)");
  }
  return value.As<Napi::Number>().Int64Value();
}

// The bits of a layout text (a preset or "T/M/S", as snowflaked's [id] layout), through
// sf_parse_layout: its refusal says which rule the text breaks and what to write.
sf_id_bits LayoutArgument(const Napi::Value& value) {
  Napi::Env env = value.Env();
  if (!value.IsString()) {
    throw Napi::TypeError::New(env,
                               "layout must be a string: a preset such as \"65536-hosts\" "
                               "or bits such as \"41/16/6\"");
  }
  const std::string text = value.As<Napi::String>().Utf8Value();
  sf_id_bits bits;
  if (const sf_status status = sf_parse_layout(text.c_str(), &bits); status != SF_OK) {
    throw MakeError(env, sf_status_str(status), sf_last_error());
  }
  return bits;
}

// _decode(id: bigint, epochUnixMs: number, layout: string) -> [unixMs, machine, sequence]
// with that epoch and layout (a client decodes with its daemon's: Client._decodeId).
Napi::Value Decode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t id = IdArgument(info[0]);
  const int64_t epoch = Int64Argument(info[1], "epoch");
  const sf_id_bits bits = LayoutArgument(info[2]);
  sf_decoded_id fields;
  if (const sf_status status = sf_decode_in(&bits, epoch, id, &fields); status != SF_OK) {
    throw MakeError(env, sf_status_str(status), sf_last_error());
  }
  return FieldsArray(env, snowflake::DecodedId{fields.unix_ms, fields.machine, fields.sequence});
}

// _bounds(epochUnixMs, fromUnixMs, toUnixMs, layout) -> [firstId, lastId, firstUnixMs,
// lastUnixMs]
Napi::Value Bounds(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int64_t epoch = Int64Argument(info[0], "epoch");
  const int64_t from = Int64Argument(info[1], "from");
  const int64_t to = Int64Argument(info[2], "to");
  const sf_id_bits bits = LayoutArgument(info[3]);
  sf_id_bounds bounds;
  if (const sf_status status = sf_bounds_in(&bits, epoch, from, to, &bounds); status != SF_OK) {
    throw MakeError(env, sf_status_str(status), sf_last_error());
  }
  Napi::Array out = Napi::Array::New(env, 4);
  out.Set(0u, Napi::BigInt::New(env, bounds.first_id));
  out.Set(1u, Napi::BigInt::New(env, bounds.last_id));
  out.Set(2u, Napi::Number::New(env, static_cast<double>(bounds.first_unix_ms)));
  out.Set(3u, Napi::Number::New(env, static_cast<double>(bounds.last_unix_ms)));
  return out;
}

// _parseTime(text) -> Unix ms, as snowflakectl reads times.
Napi::Value ParseTime(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "a time text");
  int64_t unix_ms = 0;
  const std::string text = info[0].As<Napi::String>().Utf8Value();
  if (const sf_status status = sf_parse_time(text.c_str(), &unix_ms); status != SF_OK) {
    throw MakeError(env, sf_status_str(status), sf_last_error());
  }
  return Napi::Number::New(env, static_cast<double>(unix_ms));
}

// _init(SnowflakeError): the class every error of the library is thrown as.
Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsFunction()) throw Napi::TypeError::New(env, "a class");
  env.GetInstanceData<AddonData>()->error_class = Napi::Persistent(info[0].As<Napi::Function>());
  return env.Undefined();
}

// _errorCodes() -> every error code of the C ABI, for the tests.
Napi::Value ErrorCodes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array codes = Napi::Array::New(env);
  uint32_t i = 0;
  for (int s = SF_INVALID_SERVICE_NAME; s <= SF_RING_EMPTY; ++s) {
    codes.Set(i++, Napi::String::New(env, sf_status_str(static_cast<sf_status>(s))));
  }
  return codes;
}

// _errorActions() -> sf_status_action of every error code, in _errorCodes' order: what a
// caller does ("fail_over", ...), the one failover rule of every language.
Napi::Value ErrorActions(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array actions = Napi::Array::New(env);
  uint32_t i = 0;
  for (int s = SF_INVALID_SERVICE_NAME; s <= SF_RING_EMPTY; ++s) {
    actions.Set(i++,
                Napi::String::New(env, sf_action_str(sf_status_action(static_cast<sf_status>(s)))));
  }
  return actions;
}

// _floor(): a bare call into the addon, the benchmark's floor.
Napi::Value Floor(const Napi::CallbackInfo& info) { return info.Env().Undefined(); }

Napi::Object Module(Napi::Env env, Napi::Object exports) {
  auto* data = new AddonData();
  env.SetInstanceData(data);
  exports.Set("Client", Client::Define(env));
  exports.Set("DEFAULT_EPOCH_UNIX_MS",
              Napi::Number::New(env, static_cast<double>(SF_DEFAULT_EPOCH_UNIX_MS)));
  exports.Set("_init", Napi::Function::New<Init>(env, "_init"));
  exports.Set("_decode", Napi::Function::New<Decode>(env, "_decode"));
  exports.Set("_bounds", Napi::Function::New<Bounds>(env, "_bounds"));
  exports.Set("_parseTime", Napi::Function::New<ParseTime>(env, "_parseTime"));
  exports.Set("_errorCodes", Napi::Function::New<ErrorCodes>(env, "_errorCodes"));
  exports.Set("_errorActions", Napi::Function::New<ErrorActions>(env, "_errorActions"));
  exports.Set("_floor", Napi::Function::New<Floor>(env, "_floor"));
  return exports;
}

}  // namespace

NODE_API_MODULE(snowflake, Module)

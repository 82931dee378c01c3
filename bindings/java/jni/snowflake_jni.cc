// libsnowflake_jni.so: the native half of the Java package example.snowflaked. The takes
// go over libsnowflake's C ABI (snowflake/snowflake.h); status() reads the segment through
// the C++ Client::Inspect, asks the daemon through snowflake::protocol::QueryStatus and
// hands Java the JSON that `snowflakectl status --json`, Python and Node.js get
// (libclient/status/status_report.h), which Status.java reads by key.
// The Java side (Native.java) declares every method here; javac -h writes their prototypes
// into example_snowflaked_Native.h, which this file includes, so a signature that drifts
// fails the build. No C++ exception leaves an entry point.
//
// A client is a `long` on the Java side: the sf_client pointer. SnowflakeClient guards it
// with its CloseGuard so that no call runs after close (the C ABI requires that sf_close
// does not race with other calls). The take methods allocate nothing and throw only on failure:
// the exception is built by SnowflakeException.fromNative, looked up once at load.

#include <jni.h>

#include <algorithm>
#include <boost/locale/utf.hpp>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "example_snowflaked_Native.h"
#include "libclient/status/status_report.h"
#include "protocol/control_client.h"
#include "protocol/control_protocol.h"
#include "snowflake/client.h"
#include "snowflake/snowflake.h"

namespace {

namespace utf = boost::locale::utf;

// Global references made in JNI_OnLoad, never released (the library is never unloaded
// while a class of the package lives).
jclass exception_class = nullptr;       // example.snowflaked.SnowflakeException
jmethodID exception_factory = nullptr;  // static fromNative(int, String, String, String)
jclass string_class = nullptr;
jclass object_class = nullptr;

// A Java string of UTF-8 bytes. NewStringUTF wants modified UTF-8, and what it does with
// anything else (a 4-byte sequence; a byte that is not UTF-8, in a path or a group name)
// is undefined, so the bytes are decoded here (Boost.Locale's UTF traits): each byte that
// does not begin a valid sequence (overlong, a surrogate, past U+10FFFF, cut short)
// becomes U+FFFD.
jstring JavaString(JNIEnv* env, std::string_view utf8) {
  std::u16string units;
  units.reserve(utf8.size());
  const char* at = utf8.data();
  const char* const end = at + utf8.size();
  while (at != end) {
    const char* const start = at;
    utf::code_point c = utf::utf_traits<char>::decode(at, end);
    if (c == utf::illegal || c == utf::incomplete) {
      c = 0xFFFD;
      at = start + 1;
    }
    utf::utf_traits<char16_t>::encode(c, std::back_inserter(units));
  }
  return env->NewString(reinterpret_cast<const jchar*>(units.data()),
                        static_cast<jsize>(units.size()));
}

// Throws the SnowflakeException subclass for `status`, with the library's message.
// Its class follows the status's action (sf_status_action): the one failover rule.
void ThrowStatus(JNIEnv* env, int status, const char* code, const char* message) {
  jstring code_text = env->NewStringUTF(code);
  jstring action_text =
      env->NewStringUTF(sf_action_str(sf_status_action(static_cast<sf_status>(status))));
  jstring message_text = JavaString(env, message);
  if (env->ExceptionCheck()) return;  // out of memory: that error is thrown instead
  auto error = static_cast<jthrowable>(
      env->CallStaticObjectMethod(exception_class, exception_factory, static_cast<jint>(status),
                                  code_text, action_text, message_text));
  if (env->ExceptionCheck()) return;
  env->Throw(error);
}

void ThrowStatus(JNIEnv* env, sf_status status) {
  ThrowStatus(env, status, sf_status_str(status), sf_last_error());
}

void ThrowInvalidArgument(JNIEnv* env, const std::string& message) {
  ThrowStatus(env, SF_INVALID_ARGUMENT, sf_status_str(SF_INVALID_ARGUMENT), message.c_str());
}

// A Java string as standard UTF-8 for the length of a call; null stays null. JNI's own
// conversion (GetStringUTFChars) gives "modified UTF-8", which writes a character outside
// the BMP as two 3-byte surrogates and NUL as C0 80: a runtime directory named with an
// emoji would then be another directory than the one Java created. So the UTF-16 is
// encoded here; an unpaired surrogate or a NUL (which would cut the C string short) is
// refused with IllegalArgumentException's SnowflakeException, naming `what`.
class Utf8 {
 public:
  Utf8(JNIEnv* env, jstring text, const char* what) : null_(text == nullptr) {
    // One conversion failed already: its exception is pending, and JNI allows no call.
    if (null_ || env->ExceptionCheck()) return;
    const jsize length = env->GetStringLength(text);
    std::u16string units(static_cast<size_t>(length), u'\0');
    env->GetStringRegion(text, 0, length, reinterpret_cast<jchar*>(units.data()));
    if (env->ExceptionCheck()) return;
    std::string out;
    out.reserve(units.size());
    const char16_t* at = units.data();
    const char16_t* const end = at + units.size();
    while (at != end) {
      const size_t index = static_cast<size_t>(at - units.data());
      const utf::code_point c = utf::utf_traits<char16_t>::decode(at, end);
      if (c == utf::illegal || c == utf::incomplete) {
        Refuse(env, what, "an unpaired surrogate at index " + std::to_string(index));
        return;
      }
      if (c == 0) {
        Refuse(env, what, "a NUL character at index " + std::to_string(index));
        return;
      }
      utf::utf_traits<char>::encode(c, std::back_inserter(out));
    }
    text_ = std::move(out);
    ok_ = true;
  }
  // False when a non-null string was refused or could not be converted (an exception is
  // pending).
  bool ok() const { return null_ || ok_; }
  const char* get() const { return null_ ? nullptr : text_.c_str(); }

 private:
  static void Refuse(JNIEnv* env, const char* what, const std::string& why);

  bool null_;
  bool ok_ = false;
  std::string text_;
};

void Utf8::Refuse(JNIEnv* env, const char* what, const std::string& why) {
  ThrowInvalidArgument(env, std::string(what) + ": not valid Unicode text: " + why);
}

sf_client* Handle(jlong handle) { return reinterpret_cast<sf_client*>(handle); }

// A String[] of UTF-8 texts. It makes nothing while an exception is pending (JNI allows no
// other call then): it returns null, and the entry point returns with the exception.
jobjectArray NewStrings(JNIEnv* env, const std::vector<std::string>& texts) {
  if (env->ExceptionCheck()) return nullptr;
  jobjectArray out = env->NewObjectArray(static_cast<jsize>(texts.size()), string_class, nullptr);
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < texts.size(); ++i) {
    jstring text = JavaString(env, texts[i]);
    if (text == nullptr) return nullptr;
    env->SetObjectArrayElement(out, static_cast<jsize>(i), text);
    env->DeleteLocalRef(text);
  }
  return out;
}

}  // namespace

extern "C" JNIEXPORT jint JNI_OnLoad(JavaVM* vm, void* /*reserved*/) {
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_10) != JNI_OK) return JNI_ERR;
  auto global = [env](const char* name) -> jclass {
    jclass local = env->FindClass(name);
    if (local == nullptr) return nullptr;
    auto out = static_cast<jclass>(env->NewGlobalRef(local));
    env->DeleteLocalRef(local);
    return out;
  };
  exception_class = global("example/snowflaked/SnowflakeException");
  string_class = global("java/lang/String");
  object_class = global("java/lang/Object");
  if (exception_class == nullptr || string_class == nullptr || object_class == nullptr) {
    return JNI_ERR;
  }
  exception_factory =
      env->GetStaticMethodID(exception_class, "fromNative",
                             "(ILjava/lang/String;Ljava/lang/String;Ljava/lang/String;)"
                             "Lexample/snowflaked/SnowflakeException;");
  if (exception_factory == nullptr) return JNI_ERR;
  return JNI_VERSION_10;
}

JNIEXPORT jlong JNICALL Java_example_snowflaked_Native_open(
    JNIEnv* env, jclass, jstring service, jstring runtime_dir, jint wait_timeout_ms,
    jint max_heartbeat_age_ms, jstring remotes, jstring remotes_ca, jstring remotes_cert,
    jstring remotes_key) {
  const Utf8 service_text(env, service, "the service name"),
      dir(env, runtime_dir, "the runtime directory"), remote_list(env, remotes, "the remotes"),
      ca(env, remotes_ca, "the remotes' CA file"), cert(env, remotes_cert, "the certificate file"),
      key(env, remotes_key, "the key file");
  if (!service_text.ok() || !dir.ok() || !remote_list.ok() || !ca.ok() || !cert.ok() || !key.ok()) {
    return 0;
  }
  // Options.java checked both numbers (0..2^31-1), so the casts keep them.
  sf_options options;
  sf_options_init(&options);
  options.wait_timeout_ms = static_cast<uint32_t>(wait_timeout_ms);
  options.max_heartbeat_age_ms = static_cast<uint32_t>(max_heartbeat_age_ms);
  options.runtime_dir = dir.get();
  options.remotes = remote_list.get();
  options.remotes_ca = ca.get();
  options.remotes_cert = cert.get();
  options.remotes_key = key.get();
  sf_client* client = nullptr;
  if (const sf_status status = sf_open(service_text.get(), &options, &client); status != SF_OK) {
    ThrowStatus(env, status);
    return 0;
  }
  return reinterpret_cast<jlong>(client);
}

JNIEXPORT jlong JNICALL Java_example_snowflaked_Native_next(JNIEnv* env, jclass, jlong handle) {
  uint64_t id = 0;
  if (const sf_status status = sf_next(Handle(handle), &id); status != SF_OK) {
    ThrowStatus(env, status);
    return 0;
  }
  return static_cast<jlong>(id);
}

JNIEXPORT jint JNICALL Java_example_snowflaked_Native_nextBatch(JNIEnv* env, jclass, jlong handle,
                                                                jlongArray ids) {
  const jsize n = env->GetArrayLength(ids);
  if (n < 1) {
    ThrowInvalidArgument(env, "nextBatch: n must be at least 1");
    return 0;
  }
  // Taken into a native buffer, then copied: sf_next_batch may wait on an empty ring, and
  // a critical section on the Java array must not block the garbage collector that long.
  // Batches up to 1024 IDs use the stack.
  constexpr jsize kOnStack = 1024;
  uint64_t on_stack[kOnStack];
  std::unique_ptr<uint64_t[]> on_heap;
  uint64_t* buffer = on_stack;
  if (n > kOnStack) {
    on_heap.reset(new (std::nothrow) uint64_t[static_cast<size_t>(n)]);
    if (!on_heap) {
      ThrowStatus(env, SF_SYSTEM_ERROR, sf_status_str(SF_SYSTEM_ERROR),
                  "nextBatch: out of memory for the batch; ask for fewer IDs at once");
      return 0;
    }
    buffer = on_heap.get();
  }
  size_t got = 0;
  if (const sf_status status = sf_next_batch(Handle(handle), buffer, static_cast<size_t>(n), &got);
      status != SF_OK) {
    ThrowStatus(env, status);
    return 0;
  }
  static_assert(sizeof(jlong) == sizeof(uint64_t), "IDs are copied as 64-bit words");
  env->SetLongArrayRegion(ids, 0, static_cast<jsize>(got), reinterpret_cast<const jlong*>(buffer));
  return static_cast<jint>(got);
}

JNIEXPORT void JNICALL Java_example_snowflaked_Native_close(JNIEnv*, jclass, jlong handle) {
  sf_close(Handle(handle));
}

namespace {

// An ID's fields into Java's long[3] {unix_ms, machine, sequence} (Snowflake.decode).
jboolean PutDecoded(JNIEnv* env, const sf_decoded_id& fields, jlongArray out) {
  const jlong values[3] = {fields.unix_ms, fields.machine, fields.sequence};
  env->SetLongArrayRegion(out, 0, 3, values);
  return JNI_TRUE;
}

// Bounds into Java's long[4] {first_id, last_id, first_unix_ms, last_unix_ms}
// (Snowflake.bounds).
jboolean PutBounds(JNIEnv* env, const sf_id_bounds& bounds, jlongArray out) {
  const jlong values[4] = {static_cast<jlong>(bounds.first_id), static_cast<jlong>(bounds.last_id),
                           bounds.first_unix_ms, bounds.last_unix_ms};
  env->SetLongArrayRegion(out, 0, 4, values);
  return JNI_TRUE;
}

}  // namespace

JNIEXPORT jboolean JNICALL Java_example_snowflaked_Native_decode(JNIEnv* env, jclass, jlong handle,
                                                                 jlong id, jlongArray out) {
  sf_decoded_id fields{};
  if (const sf_status status = sf_decode(Handle(handle), static_cast<uint64_t>(id), &fields);
      status != SF_OK) {
    ThrowStatus(env, status);
    return JNI_FALSE;
  }
  return PutDecoded(env, fields, out);
}

JNIEXPORT jboolean JNICALL Java_example_snowflaked_Native_bounds(JNIEnv* env, jclass,
                                                                 jlong epoch_unix_ms,
                                                                 jlong from_unix_ms,
                                                                 jlong to_unix_ms, jlongArray out) {
  sf_id_bounds bounds{};
  if (const sf_status status = sf_bounds(epoch_unix_ms, from_unix_ms, to_unix_ms, &bounds);
      status != SF_OK) {
    ThrowStatus(env, status);
    return JNI_FALSE;
  }
  return PutBounds(env, bounds, out);
}

namespace {

// The bits of `layout` (a preset or "T/M/S", sf_parse_layout) into *bits, or false with
// an exception pending.
bool LayoutBits(JNIEnv* env, jstring layout, sf_id_bits* bits) {
  const Utf8 text(env, layout, "the layout");
  if (!text.ok()) return false;
  if (text.get() == nullptr) {
    ThrowInvalidArgument(env,
                         "the layout is null: give a preset such as \"65536-hosts\" or "
                         "bits such as \"41/16/6\"");
    return false;
  }
  if (const sf_status status = sf_parse_layout(text.get(), bits); status != SF_OK) {
    ThrowStatus(env, status);
    return false;
  }
  return true;
}

}  // namespace

JNIEXPORT jboolean JNICALL Java_example_snowflaked_Native_decodeIn(JNIEnv* env, jclass,
                                                                   jstring layout,
                                                                   jlong epoch_unix_ms, jlong id,
                                                                   jlongArray out) {
  sf_id_bits bits{};
  if (!LayoutBits(env, layout, &bits)) return JNI_FALSE;
  sf_decoded_id fields{};
  if (const sf_status status =
          sf_decode_in(&bits, epoch_unix_ms, static_cast<uint64_t>(id), &fields);
      status != SF_OK) {
    ThrowStatus(env, status);
    return JNI_FALSE;
  }
  return PutDecoded(env, fields, out);
}

JNIEXPORT jboolean JNICALL
Java_example_snowflaked_Native_boundsIn(JNIEnv* env, jclass, jstring layout, jlong epoch_unix_ms,
                                        jlong from_unix_ms, jlong to_unix_ms, jlongArray out) {
  sf_id_bits bits{};
  if (!LayoutBits(env, layout, &bits)) return JNI_FALSE;
  sf_id_bounds bounds{};
  if (const sf_status status =
          sf_bounds_in(&bits, epoch_unix_ms, from_unix_ms, to_unix_ms, &bounds);
      status != SF_OK) {
    ThrowStatus(env, status);
    return JNI_FALSE;
  }
  return PutBounds(env, bounds, out);
}

JNIEXPORT jlong JNICALL Java_example_snowflaked_Native_parseTime(JNIEnv* env, jclass,
                                                                 jstring text) {
  const Utf8 chars(env, text, "the time");
  if (!chars.ok()) return 0;
  int64_t unix_ms = 0;
  if (const sf_status status = sf_parse_time(chars.get(), &unix_ms); status != SF_OK) {
    ThrowStatus(env, status);
    return 0;
  }
  return unix_ms;
}

JNIEXPORT jint JNICALL Java_example_snowflaked_Native_floor(JNIEnv*, jclass, jint value) {
  return value + 1;
}

JNIEXPORT jobjectArray JNICALL Java_example_snowflaked_Native_errorCodes(JNIEnv* env, jclass) {
  try {
    std::vector<std::string> names;
    for (int s = SF_INVALID_SERVICE_NAME; s <= SF_RING_EMPTY; ++s) {
      names.emplace_back(sf_status_str(static_cast<sf_status>(s)));
    }
    return NewStrings(env, names);
  } catch (const std::exception& e) {  // no C++ exception crosses into the JVM
    ThrowStatus(env, SF_SYSTEM_ERROR, sf_status_str(SF_SYSTEM_ERROR), e.what());
    return nullptr;
  }
}

JNIEXPORT jint JNICALL Java_example_snowflaked_Native_maxBatch(JNIEnv*, jclass) {
  static_assert(snowflake::shm::kMaxCapacity <= INT32_MAX, "MAX_BATCH is a Java int");
  return static_cast<jint>(snowflake::shm::kMaxCapacity);
}

JNIEXPORT jobjectArray JNICALL Java_example_snowflaked_Native_errorActions(JNIEnv* env, jclass) {
  try {
    std::vector<std::string> actions;
    for (int s = SF_INVALID_SERVICE_NAME; s <= SF_RING_EMPTY; ++s) {
      actions.emplace_back(sf_action_str(sf_status_action(static_cast<sf_status>(s))));
    }
    return NewStrings(env, actions);
  } catch (const std::exception& e) {  // no C++ exception crosses into the JVM
    ThrowStatus(env, SF_SYSTEM_ERROR, sf_status_str(SF_SYSTEM_ERROR), e.what());
    return nullptr;
  }
}

// The status as the JSON object `snowflakectl status --json` prints (docs/cli.md), written
// by the one writer every binding shares (libclient/status/status_report.h): the
// segment's view (Client::Inspect, which registers no service) and, when ask_daemon, the
// daemon's answer on its control socket (protocol::QueryStatus) under "daemon", or why
// there is none in "daemon_error". Status.fromJson reads it by key, so a new fact is a new
// key, never a new position.
namespace {

std::string StatusJson(JNIEnv* env, jstring runtime_dir, jint max_heartbeat_age_ms,
                       jboolean ask_daemon) {
  const Utf8 dir_text(env, runtime_dir, "the runtime directory");
  if (!dir_text.ok()) return {};
  snowflake::ClientOptions options;
  if (dir_text.get() != nullptr) options.runtime_dir = dir_text.get();
  options.max_heartbeat_age = std::chrono::milliseconds(max_heartbeat_age_ms);
  options.remotes_from_environment = false;
  const std::filesystem::path dir =
      options.runtime_dir.empty() ? snowflake::DefaultRuntimeDir() : options.runtime_dir;

  auto segment = snowflake::Client::Inspect(options);
  if (!segment) {
    const std::string code(snowflake::ClientErrorName(segment.error().code));
    ThrowStatus(env, static_cast<int>(segment.error().code) + 1, code.c_str(),
                segment.error().message.c_str());
    return {};
  }
  snowflake::status::StatusReport report;
  report.segment = std::move(*segment);
  report.runtime_dir = dir.string();
  if (ask_daemon) {
    snowflake::status::SetDaemonAnswer(
        report, snowflake::protocol::QueryStatus(dir, std::chrono::seconds(2)));
  }
  report.now_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  return snowflake::protocol::Dump(snowflake::status::StatusToJson(report));
}

}  // namespace

JNIEXPORT jstring JNICALL Java_example_snowflaked_Native_status(JNIEnv* env, jclass,
                                                                jstring runtime_dir,
                                                                jint max_heartbeat_age_ms,
                                                                jboolean ask_daemon) {
  try {
    const std::string json = StatusJson(env, runtime_dir, max_heartbeat_age_ms, ask_daemon);
    if (env->ExceptionCheck()) return nullptr;
    return JavaString(env, json);
  } catch (const std::exception& e) {  // no C++ exception crosses into the JVM
    if (!env->ExceptionCheck()) {
      ThrowStatus(env, SF_SYSTEM_ERROR, sf_status_str(SF_SYSTEM_ERROR), e.what());
    }
    return nullptr;
  }
}

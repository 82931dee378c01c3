package example.snowflaked;

/**
 * Loads libsnowflake_jni.so once: from the file the system property
 * {@code snowflake.jni.path} names (a build tree, tests), else by
 * {@code System.loadLibrary("snowflake_jni")} from {@code java.library.path} (Debian's
 * OpenJDK searches /usr/lib/x86_64-linux-gnu/jni there).
 */
final class NativeLoader {
  static final String PATH_PROPERTY = "snowflake.jni.path";

  private NativeLoader() {}

  static synchronized void load() {
    String path = System.getProperty(PATH_PROPERTY);
    try {
      if (path != null && !path.isEmpty()) {
        System.load(path);
      } else {
        System.loadLibrary("snowflake_jni");
      }
    } catch (UnsatisfiedLinkError e) {
      UnsatisfiedLinkError error = new UnsatisfiedLinkError(
          "cannot load the snowflake JNI library "
              + (path != null && !path.isEmpty() ? "from " + path
                  : "libsnowflake_jni.so from java.library.path ("
                      + System.getProperty("java.library.path") + ")")
              + ": " + e.getMessage() + ". Install libsnowflake-java, or set -D"
              + PATH_PROPERTY + "=/path/to/libsnowflake_jni.so or -Djava.library.path");
      error.initCause(e);
      throw error;
    }
  }
}

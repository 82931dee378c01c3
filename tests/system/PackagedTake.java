// The Java binding as installed by libsnowflake-java (tests/system/packages_under_systemd.sh):
// /usr/share/java/snowflake.jar on the class path, libsnowflake_jni.so found by the JVM's
// own java.library.path in /usr/lib/<triplet>/jni. `take`: one ID and a batch of three,
// increasing, and the daemon's state over its control socket; `refused`: opening must fail
// with permission_denied naming the daemon's group.
import example.snowflaked.SnowflakeClient;
import example.snowflaked.SnowflakeException;

public final class PackagedTake {
  public static void main(String[] args) throws Exception {
    if (args.length == 1 && args[0].equals("take")) {
      try (SnowflakeClient client = SnowflakeClient.open("packaged-java")) {
        long first = client.next();
        long[] batch = client.nextBatch(3);
        for (int i = 0; i < batch.length; ++i) {
          long before = i == 0 ? first : batch[i - 1];
          if (batch[i] <= before) {
            throw new AssertionError("not increasing: " + before + " then " + batch[i]);
          }
        }
        String state = client.status().state();
        if (!state.equals("serving")) throw new AssertionError("status says " + state);
        System.out.println(first + " " + SnowflakeClient.decode(first).time());
      }
    } else if (args.length == 1 && args[0].equals("refused")) {
      try (SnowflakeClient client = SnowflakeClient.open("packaged-java")) {
        throw new AssertionError("opened without the group");
      } catch (SnowflakeException e) {
        if (!e.code().equals("permission_denied") || !e.getMessage().contains("snowflaked")) throw e;
        System.out.println(e.code() + ": " + e.getMessage());
      }
    } else {
      throw new IllegalArgumentException("usage: PackagedTake take|refused");
    }
  }
}

/* Takes one ID through the installed C ABI (found with pkg-config). */
#include <inttypes.h>
#include <snowflake/snowflake.h>
#include <stdio.h>

int main(void) {
  sf_client *client;
  uint64_t id;
  if (sf_open("consumer-c", NULL, &client) != SF_OK || sf_next(client, &id) != SF_OK) {
    fprintf(stderr, "%s\n", sf_last_error());
    return 1;
  }
  printf("%" PRIu64 "\nok\n", id);
  sf_close(client);
  return 0;
}

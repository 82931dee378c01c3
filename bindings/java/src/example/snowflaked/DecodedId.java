package example.snowflaked;

import java.time.Instant;

/**
 * The fields of an ID: its millisecond, machine number and sequence (below 2^machine bits and
 * 2^sequence bits of the layout that decoded it).
 */
public record DecodedId(Instant time, int machine, int sequence) {}

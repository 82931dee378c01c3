package example.snowflaked;

import java.time.Instant;

/** The fields of an ID: its millisecond, machine number (0..1023) and sequence (0..4095). */
public record DecodedId(Instant time, int machine, int sequence) {}

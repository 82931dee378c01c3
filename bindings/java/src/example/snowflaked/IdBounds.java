package example.snowflaked;

import java.time.Instant;

/**
 * The IDs of a time range, for {@code WHERE id BETWEEN firstId AND lastId}: the smallest
 * ID any machine can make at {@code first} and the largest at {@code last}. A range that
 * reaches outside what the epoch's IDs can carry is cut to it; first and last say where.
 */
public record IdBounds(long firstId, long lastId, Instant first, Instant last) {}

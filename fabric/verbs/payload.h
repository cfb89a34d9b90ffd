// The C twins of payload.go's Fill and Check, for the data path that
// runs in C (fabric/verbs' echo and ping loops): the same layout, seed
// and stream, so a message payload.Fill wrote checks here exactly when
// payload.Check passes it, and one written here is payload.Fill's byte
// for byte. TestEchoSpin and TestPingSpin (fabric/verbs) hold them
// together. It lives here, not in package payload, which stays pure Go.

#ifndef RDMAPROBE_PAYLOAD_H
#define RDMAPROBE_PAYLOAD_H

#include <stdint.h>
#include <string.h>

#define RP_PAYLOAD_HEADER 12
#define RP_PAYLOAD_BYE UINT64_MAX

static inline uint64_t rp_payload_seed(uint64_t seq, int n) {
	uint64_t x = seq * 0x9e3779b97f4a7c15ULL ^ (uint64_t)n * 0xd1b54a32d192ed03ULL;
	return x ? x : 1;
}

static inline uint64_t rp_payload_next(uint64_t x) {
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

static inline uint32_t rp_payload_tag(uint64_t seq) {
	uint64_t z = seq + 0x9e3779b97f4a7c15ULL;
	z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ z >> 27) * 0x94d049bb133111ebULL;
	return (uint32_t)((z ^ z >> 31) >> 32);
}

static inline uint64_t rp_load_be64(const uint8_t *b) {
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) v = v << 8 | b[i];
	return v;
}

static inline uint64_t rp_load_le64(const uint8_t *b) {
	uint64_t v;
	memcpy(&v, b, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline void rp_store_le64(uint8_t *b, uint64_t v) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	memcpy(b, &v, 8);
}

// rp_payload_fill writes message seq of length n (>= RP_PAYLOAD_HEADER)
// into b, as payload.Fill does.
static inline void rp_payload_fill(uint8_t *b, uint64_t seq, int n) {
	for (int i = 0; i < 8; i++) b[i] = (uint8_t)(seq >> (56 - 8 * i));
	uint32_t t = rp_payload_tag(seq);
	b[8] = (uint8_t)(t >> 24), b[9] = (uint8_t)(t >> 16), b[10] = (uint8_t)(t >> 8), b[11] = (uint8_t)t;
	uint64_t x = rp_payload_seed(seq, n);
	int i = RP_PAYLOAD_HEADER;
	for (; i + 8 <= n; i += 8) {
		x = rp_payload_next(x);
		rp_store_le64(b + i, x);
	}
	if (i < n)
		for (uint64_t v = rp_payload_next(x); i < n; i++, v >>= 8) b[i] = (uint8_t)v;
}

// rp_payload_check returns 0 and sets *seq if b (n bytes) is message *seq
// of length n as payload.Fill writes it, and -1 if it is not (or is
// shorter than the header); payload.Check says how it differs.
static inline int rp_payload_check(const uint8_t *b, int n, uint64_t *seq) {
	if (n < RP_PAYLOAD_HEADER) return -1;
	uint64_t s = rp_load_be64(b);
	uint32_t t = (uint32_t)b[8] << 24 | (uint32_t)b[9] << 16 | (uint32_t)b[10] << 8 | b[11];
	if (t != rp_payload_tag(s)) return -1;
	uint64_t x = rp_payload_seed(s, n), diff = 0;
	int i = RP_PAYLOAD_HEADER;
	for (; i + 8 <= n; i += 8) {
		x = rp_payload_next(x);
		diff |= rp_load_le64(b + i) ^ x;
	}
	if (i < n)
		for (uint64_t v = rp_payload_next(x); i < n; i++, v >>= 8) diff |= (uint8_t)(b[i] ^ (uint8_t)v);
	if (diff) return -1;
	*seq = s;
	return 0;
}

#endif

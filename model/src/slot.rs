//! Redis Cluster key slots: CRC16 of the key (or of its hash tag) modulo 16384.
//!
//! Source: the Redis Cluster specification, "Keys distribution model" and "Hash tags"
//! (<https://redis.io/docs/reference/cluster-spec/>): `HASH_SLOT = CRC16(key) mod 16384`, with
//! CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0). When the key contains a `{` followed
//! later by a `}` with at least one byte between them, only the bytes between the first `{` and
//! the first `}` after it are hashed.

/// Number of hash slots in a Redis Cluster.
pub const SLOT_COUNT: u16 = 16384;

/// CRC16-CCITT (XMODEM) as Redis's `crc16.c` computes it.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The cluster slot of `key`, honouring hash tags (`orq:{q}:leases` hashes only `q`).
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) & (SLOT_COUNT - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the values the specification and CLUSTER KEYSLOT documentation give.
    #[test]
    fn slots_match_the_cluster_specification() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"foo{hash_tag}"), 2515);
        assert_eq!(key_slot(b"bar{hash_tag}"), 2515);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag is not a tag: the whole key is hashed.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        // Only the first '{' counts, and the first '}' after it.
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"orq:{q}:leases"), key_slot(b"orq:{q}:task:01ABC"));
    }
}

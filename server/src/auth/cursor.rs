//! Sealed listing cursors: what a tenant key receives in place of the engine's cursor, so that
//! a page's position in an index every tenant shares stays hidden from it.

use super::{hex, ApiKeys};

/// Bytes of random nonce in a sealed cursor.
const CURSOR_NONCE_BYTES: usize = 12;
/// Bytes of the ChaCha20-Poly1305 tag in a sealed cursor.
const CURSOR_TAG_BYTES: usize = 16;
/// Longest cursor sealed or opened (bytes of plain text).
const CURSOR_PLAIN_MAX: usize = 64;

impl ApiKeys {
    /// A listing cursor as a tenant key receives it: the engine's cursor is an offset into an
    /// index every tenant shares, so in the clear it would tell how many of the other tenants'
    /// tasks a page skipped. Sealed with ChaCha20-Poly1305 (RFC 8439) under a secret derived from
    /// the keys file, `tenant` as associated data: hex of the 12-byte random nonce, the
    /// ciphertext and the 16-byte tag. The plain text is padded with NUL bytes to
    /// [`CURSOR_PLAIN_MAX`] first, so every sealed cursor has one length: the length of an
    /// offset or a stream id would otherwise tell its order of magnitude (how many of the other
    /// tenants' tasks or events lie before it). Opened by [`ApiKeys::open_cursor`].
    pub fn seal_cursor(&self, tenant: &str, cursor: &str) -> String {
        use chacha20poly1305::aead::{Aead, KeyInit, Payload};
        debug_assert!(cursor.len() <= CURSOR_PLAIN_MAX, "engine cursors are short");
        let mut nonce = [0u8; CURSOR_NONCE_BYTES];
        if getrandom::fill(&mut nonce).is_err() {
            // Without OS randomness the nonce is a constant: the cursor stays secret from other
            // tenants, but two equal cursors look equal.
            nonce = [0; CURSOR_NONCE_BYTES];
        }
        let mut padded = cursor.as_bytes().to_vec();
        padded.resize(CURSOR_PLAIN_MAX.max(padded.len()), 0);
        let cipher = chacha20poly1305::ChaCha20Poly1305::new(&self.cursor_secret.into());
        let sealed = cipher
            .encrypt(
                &nonce.into(),
                Payload {
                    msg: &padded,
                    aad: tenant.as_bytes(),
                },
            )
            .expect("ChaCha20-Poly1305 encrypts any short message");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        hex(&out)
    }

    /// The engine cursor sealed in `sealed` for `tenant`, or `None` when it is malformed, was
    /// sealed for another tenant or under another keys file.
    pub fn open_cursor(&self, tenant: &str, sealed: &str) -> Option<String> {
        let max = 2 * (CURSOR_NONCE_BYTES + CURSOR_PLAIN_MAX + CURSOR_TAG_BYTES);
        if sealed.len() > max || sealed.len() % 2 != 0 {
            return None;
        }
        let bytes: Vec<u8> = sealed
            .as_bytes()
            .chunks_exact(2)
            .map(|p| {
                let s = std::str::from_utf8(p).ok()?;
                u8::from_str_radix(s, 16).ok()
            })
            .collect::<Option<_>>()?;
        if bytes.len() < CURSOR_NONCE_BYTES + CURSOR_TAG_BYTES {
            return None;
        }
        use chacha20poly1305::aead::{Aead, KeyInit, Payload};
        let (nonce, body) = bytes.split_at(CURSOR_NONCE_BYTES);
        let nonce: [u8; CURSOR_NONCE_BYTES] = nonce.try_into().ok()?;
        let cipher = chacha20poly1305::ChaCha20Poly1305::new(&self.cursor_secret.into());
        let plain = cipher
            .decrypt(
                &nonce.into(),
                Payload {
                    msg: body,
                    aad: tenant.as_bytes(),
                },
            )
            .ok()?;
        let end = plain.iter().position(|&b| b == 0).unwrap_or(plain.len());
        String::from_utf8(plain[..end].to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{toml_entry, Scope};

    const A: &str = "orq_aaaa";

    fn file(entries: &str) -> Result<ApiKeys, String> {
        ApiKeys::parse(entries)
    }

    // Goal: a sealed cursor opens to the engine's cursor for its tenant only, shows nothing of
    // it (two seals of one cursor differ), and any change to it is refused.
    #[test]
    fn sealed_cursors_open_only_unchanged_and_for_their_tenant() {
        let keys = file(&toml_entry("ops", A, &Scope::Admin)).unwrap();
        let plain = "4:0:12345";
        let a = keys.seal_cursor("acme", plain);
        let b = keys.seal_cursor("acme", plain);
        assert_ne!(a, b, "random nonce");
        assert!(!a.contains("12345"));
        assert_eq!(keys.open_cursor("acme", &a).as_deref(), Some(plain));
        assert_eq!(keys.open_cursor("bolt", &a), None, "another tenant");
        let mut flipped = a.clone().into_bytes();
        let i = 2 * CURSOR_NONCE_BYTES + 1;
        flipped[i] = if flipped[i] == b'0' { b'1' } else { b'0' };
        let flipped = String::from_utf8(flipped).unwrap();
        assert_eq!(keys.open_cursor("acme", &flipped), None, "tampered");
        for bad in ["", "zz", "4:0:12345", &"0".repeat(400), &a[..a.len() - 2]] {
            assert_eq!(keys.open_cursor("acme", bad), None, "{bad:?}");
        }
        let other = file(&toml_entry("ops", "orq_other", &Scope::Admin)).unwrap();
        assert_eq!(other.open_cursor("acme", &a), None, "another keys file");
    }

    // Goal: a sealed cursor's length says nothing of the cursor's: a short offset and a long
    // stream id seal to texts of one length, and both open to what was sealed.
    #[test]
    fn sealed_cursors_all_have_one_length() {
        let keys = file(&toml_entry("ops", A, &Scope::Admin)).unwrap();
        let plains = [
            "0-0",
            "4:0:1",
            "1796686943245-3000",
            "1796686943245-18446744073709551615",
        ];
        let sealed: Vec<String> = plains.iter().map(|p| keys.seal_cursor("acme", p)).collect();
        for (p, s) in plains.iter().zip(&sealed) {
            assert_eq!(s.len(), sealed[0].len(), "{p}");
            assert_eq!(keys.open_cursor("acme", s).as_deref(), Some(*p));
        }
    }
}

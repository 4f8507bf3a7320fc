//! The byte format of the fuzz inputs: a reader over `arbitrary::Unstructured` and the writer
//! the seed helper uses. Every value is one of: a byte (`u8`), a choice among `n` (one byte,
//! modulo `n`), a little-endian `u16` / `i64`, or a short byte string (a length byte, at most
//! [`SHORT_MAX`], then the bytes). A reader past the end reads zeros, as `arbitrary` does.

use arbitrary::{Result, Unstructured};

/// Longest short byte string (bytes).
pub const SHORT_MAX: usize = 64;

/// Decodes the fuzz input format.
pub struct Reader<'a, 'b> {
    u: &'b mut Unstructured<'a>,
}

impl<'a, 'b> Reader<'a, 'b> {
    /// A reader over `u`.
    pub fn new(u: &'b mut Unstructured<'a>) -> Self {
        Reader { u }
    }

    /// True when every byte was read.
    pub fn is_empty(&self) -> bool {
        self.u.is_empty()
    }

    /// One byte.
    pub fn byte(&mut self) -> Result<u8> {
        self.u.arbitrary::<u8>()
    }

    /// A choice in `0..n`.
    pub fn pick(&mut self, n: usize) -> Result<u8> {
        debug_assert!((1..=256).contains(&n));
        Ok((usize::from(self.byte()?) % n) as u8)
    }

    /// A flag.
    pub fn flag(&mut self) -> Result<bool> {
        Ok(self.byte()? & 1 == 1)
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> Result<u16> {
        self.u.arbitrary::<u16>()
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self) -> Result<i64> {
        self.u.arbitrary::<i64>()
    }

    /// A short byte string.
    pub fn short(&mut self) -> Result<Vec<u8>> {
        let n = usize::from(self.byte()?) % (SHORT_MAX + 1);
        let n = n.min(self.u.len());
        Ok(self.u.bytes(n)?.to_vec())
    }

    /// Every byte left.
    pub fn rest(&mut self) -> Vec<u8> {
        let n = self.u.len();
        self.u.bytes(n).map(<[u8]>::to_vec).unwrap_or_default()
    }
}

/// Encodes the fuzz input format (the seed helper).
#[derive(Debug, Default)]
pub struct Writer {
    /// The bytes so far.
    pub out: Vec<u8>,
}

impl Writer {
    /// One byte.
    pub fn byte(&mut self, b: u8) {
        self.out.push(b);
    }

    /// A choice (written as itself: the reader takes it modulo n).
    pub fn pick(&mut self, k: u8) {
        self.out.push(k);
    }

    /// A flag.
    pub fn flag(&mut self, f: bool) {
        self.out.push(u8::from(f));
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// A short byte string.
    ///
    /// # Panics
    /// When `b` is longer than [`SHORT_MAX`].
    pub fn short(&mut self, b: &[u8]) {
        assert!(b.len() <= SHORT_MAX, "short string of {} bytes", b.len());
        self.out.push(b.len() as u8);
        self.out.extend_from_slice(b);
    }

    /// Raw bytes (the rest of an input).
    pub fn rest(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }
}

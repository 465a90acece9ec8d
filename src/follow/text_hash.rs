//! A fast streaming hash of text, for telling whether a text seen before is
//! the head of one seen now without keeping a copy of it.
//!
//! agy rewrites a growing answer whole at every commit, so the bridge hashes
//! up to the whole answer per commit (a 50 MB answer over ten commits is
//! 275 MB of hashing). A byte-at-a-time hash (FNV) or SipHash cost a tenth
//! of a second each on it; this one takes eight bytes per multiply.
//!
//! It is neither keyed nor collision-resistant: whoever knows it can write
//! two texts with one hash. The most that buys is an answer rewritten in
//! place shown as grown (the tracker) or agy's two accounts of its answer
//! taken as one (the runner), and whoever writes agy's answer writes both
//! texts anyway. It indexes nothing, so there is nothing to flood.

/// The hash of the bytes written so far, however they were cut into
/// writes. Two texts not written to collide hash alike only when equal
/// (but for a 2^-64 chance).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TextHash {
    state: u64,
    len: usize,
    /// The last `len % 8` bytes, not yet in `state`; the rest zero.
    partial: [u8; 8],
}

const SEED: u64 = 0xcbf2_9ce4_8422_2325;
const MULTIPLIER: u64 = 0xa076_1d64_78bd_642f;

/// One word into the hash: a multiply folded to 64 bits, so every bit of
/// the word reaches every bit of the result.
fn mix(state: u64, word: [u8; 8]) -> u64 {
    let product = u128::from(state ^ u64::from_le_bytes(word)) * u128::from(MULTIPLIER);
    (product as u64) ^ ((product >> 64) as u64)
}

impl Default for TextHash {
    fn default() -> TextHash {
        TextHash {
            state: SEED,
            len: 0,
            partial: [0; 8],
        }
    }
}

impl TextHash {
    pub(crate) fn of(bytes: &[u8]) -> TextHash {
        let mut h = TextHash::default();
        h.write(bytes);
        h
    }

    /// How many bytes were written.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Append `bytes`, in whole words, whatever was written before.
    pub(crate) fn write(&mut self, mut bytes: &[u8]) {
        let have = self.len % 8;
        self.len += bytes.len();
        if have > 0 {
            let take = bytes.len().min(8 - have);
            self.partial[have..have + take].copy_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if have + take < 8 {
                return;
            }
            self.state = mix(self.state, std::mem::take(&mut self.partial));
        }
        let mut words = bytes.chunks_exact(8);
        for chunk in &mut words {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.state = mix(self.state, word);
        }
        let left = words.remainder();
        self.partial[..left.len()].copy_from_slice(left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &[u8] =
        "All work and no play makes a long answer grow. 0123456789 \u{e9}t\u{e9}".as_bytes();

    #[test]
    fn hashes_are_the_same_however_the_bytes_are_cut() {
        let whole = TextHash::of(TEXT);
        for first in 0..=TEXT.len() {
            for second in first..=TEXT.len() {
                let mut parts = TextHash::default();
                for p in [&TEXT[..first], &TEXT[first..second], &TEXT[second..]] {
                    parts.write(p);
                }
                assert_eq!(parts, whole, "cut at {first} and {second}");
            }
        }
        assert_eq!(whole.len(), TEXT.len());
    }

    #[test]
    fn one_bit_anywhere_or_one_more_zero_byte_changes_the_hash() {
        let whole = TextHash::of(TEXT);
        for at in 0..TEXT.len() {
            for bit in [0x01, 0x80] {
                let mut other = TEXT.to_vec();
                other[at] ^= bit;
                assert_ne!(TextHash::of(&other), whole, "byte {at} bit {bit:#x}");
            }
        }
        // Zero bytes pad the partial word, so the length must tell them apart.
        let mut padded = TEXT.to_vec();
        padded.push(0);
        assert_ne!(TextHash::of(&padded), whole);
        assert_ne!(TextHash::of(b"\0"), TextHash::default());
    }
}

//! The protobuf wire format: a zero-copy field walker and a small encoder.
//!
//! agy publishes no `.proto` files, so everything above this module works from
//! field numbers. This layer knows nothing about agy: it splits bytes into
//! `(field number, value)` pairs and refuses malformed input with a typed error.
//! It is hand-written on purpose: it must never allocate while walking, never
//! panic and never loop, whatever bytes a database hands it, and it must skip
//! unknown fields of every wire type so that a newer agy does not break us.

use std::fmt;

/// The wire types a decoder may meet. Groups (3/4) and 6/7 are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WireType {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

impl WireType {
    pub fn code(self) -> u8 {
        match self {
            WireType::Varint => 0,
            WireType::Fixed64 => 1,
            WireType::Len => 2,
            WireType::Fixed32 => 5,
        }
    }

    /// Short human name used in reports (`varint`, `i64`, `len`, `i32`).
    pub fn name(self) -> &'static str {
        match self {
            WireType::Varint => "varint",
            WireType::Fixed64 => "i64",
            WireType::Len => "len",
            WireType::Fixed32 => "i32",
        }
    }
}

impl fmt::Display for WireType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One field's value, borrowing from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32(u32),
}

impl<'a> Value<'a> {
    pub fn wire_type(&self) -> WireType {
        match self {
            Value::Varint(_) => WireType::Varint,
            Value::Fixed64(_) => WireType::Fixed64,
            Value::Len(_) => WireType::Len,
            Value::Fixed32(_) => WireType::Fixed32,
        }
    }
}

/// One decoded field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    pub number: u32,
    pub value: Value<'a>,
}

/// Why a buffer is not valid protobuf. Offsets are byte positions in the
/// buffer being walked (not in any enclosing message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("truncated input at byte {offset}")]
    Truncated { offset: usize },
    #[error(
        "length {len} at byte {offset} runs past the end of the buffer ({available} bytes left)"
    )]
    LengthOverrun {
        offset: usize,
        len: u64,
        available: usize,
    },
    #[error("varint longer than 10 bytes at byte {offset}")]
    OverlongVarint { offset: usize },
    #[error("group wire type {wire_type} at byte {offset} (groups are not expected)")]
    Group { offset: usize, wire_type: u8 },
    #[error("invalid wire type {wire_type} at byte {offset}")]
    InvalidWireType { offset: usize, wire_type: u8 },
    #[error("invalid field number {number} at byte {offset}")]
    InvalidFieldNumber { offset: usize, number: u64 },
}

/// Read a varint at `pos`. Returns the value and the position after it.
/// Accepts up to 10 bytes; the 10th byte's high bits are ignored beyond 64 bits
/// (as protobuf implementations do), but an 11th continuation byte is an error.
pub(crate) fn read_varint(buf: &[u8], pos: usize) -> Result<(u64, usize), WireError> {
    let mut value: u64 = 0;
    let mut shift = 0u32;
    let mut at = pos;
    loop {
        if at - pos >= 10 {
            return Err(WireError::OverlongVarint { offset: pos });
        }
        let byte = *buf.get(at).ok_or(WireError::Truncated { offset: at })?;
        if shift < 64 {
            value |= u64::from(byte & 0x7f) << shift;
        }
        at += 1;
        if byte & 0x80 == 0 {
            return Ok((value, at));
        }
        shift += 7;
    }
}

/// An iterator over the fields of one message. After the first error it
/// yields that error once and then stops, so it can never loop.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    done: bool,
}

/// Walk the fields of `buf`.
pub fn fields(buf: &[u8]) -> Fields<'_> {
    Fields {
        buf,
        pos: 0,
        done: false,
    }
}

impl<'a> Fields<'a> {
    fn next_field(&mut self) -> Result<Field<'a>, WireError> {
        let start = self.pos;
        let (tag, after_tag) = read_varint(self.buf, start)?;
        let number = tag >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            return Err(WireError::InvalidFieldNumber {
                offset: start,
                number,
            });
        }
        let number = number as u32;
        let wire = (tag & 7) as u8;
        let value = match wire {
            0 => {
                let (v, end) = read_varint(self.buf, after_tag)?;
                self.pos = end;
                Value::Varint(v)
            }
            1 => {
                let bytes = self.take(after_tag, 8)?;
                let mut arr = [0u8; 8];
                arr.copy_from_slice(bytes);
                Value::Fixed64(u64::from_le_bytes(arr))
            }
            2 => {
                let (len, after_len) = read_varint(self.buf, after_tag)?;
                let available = self.buf.len() - after_len;
                if len > available as u64 {
                    return Err(WireError::LengthOverrun {
                        offset: after_tag,
                        len,
                        available,
                    });
                }
                Value::Len(self.take(after_len, len as usize)?)
            }
            5 => {
                let bytes = self.take(after_tag, 4)?;
                let mut arr = [0u8; 4];
                arr.copy_from_slice(bytes);
                Value::Fixed32(u32::from_le_bytes(arr))
            }
            3 | 4 => {
                return Err(WireError::Group {
                    offset: start,
                    wire_type: wire,
                })
            }
            _ => {
                return Err(WireError::InvalidWireType {
                    offset: start,
                    wire_type: wire,
                })
            }
        };
        Ok(Field { number, value })
    }

    fn take(&mut self, at: usize, n: usize) -> Result<&'a [u8], WireError> {
        let end = at
            .checked_add(n)
            .filter(|end| *end <= self.buf.len())
            .ok_or(WireError::Truncated {
                offset: self.buf.len(),
            })?;
        self.pos = end;
        Ok(&self.buf[at..end])
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.buf.len() {
            return None;
        }
        let item = self.next_field();
        if item.is_err() {
            self.done = true;
        }
        Some(item)
    }
}

/// Check that a whole buffer is a well-formed message (all fields, not nested).
pub fn validate(buf: &[u8]) -> Result<(), WireError> {
    for field in fields(buf) {
        field?;
    }
    Ok(())
}

/// `buf` re-encoded field by field, for a writer that changes a few fields
/// and keeps the rest: `edit` either writes a field's replacement (or
/// nothing, to drop it) into the encoder and returns `Some(true)`, or
/// returns `Some(false)` and the field is copied as it was. `None` when a
/// field does not walk or `edit` gives up.
pub fn rewrite<'a>(
    buf: &'a [u8],
    mut edit: impl FnMut(&mut Encoder, u32, Value<'a>) -> Option<bool>,
) -> Option<Vec<u8>> {
    let mut out = Encoder::new();
    for field in fields(buf) {
        let field = field.ok()?;
        if !edit(&mut out, field.number, field.value)? {
            out.value(field.number, &field.value);
        }
    }
    Some(out.finish())
}

/// Builds protobuf messages. Used by fake-agy, the recorder's redaction, the
/// corpus synthesiser and the tests, so they all share one encoder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn tag(&mut self, number: u32, wire: WireType) {
        push_varint(
            &mut self.buf,
            (u64::from(number) << 3) | u64::from(wire.code()),
        );
    }

    pub fn varint(&mut self, number: u32, value: u64) -> &mut Self {
        self.tag(number, WireType::Varint);
        push_varint(&mut self.buf, value);
        self
    }

    pub fn fixed64(&mut self, number: u32, value: u64) -> &mut Self {
        self.tag(number, WireType::Fixed64);
        self.buf.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn fixed32(&mut self, number: u32, value: u32) -> &mut Self {
        self.tag(number, WireType::Fixed32);
        self.buf.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn bytes(&mut self, number: u32, value: &[u8]) -> &mut Self {
        self.tag(number, WireType::Len);
        push_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(value);
        self
    }

    pub fn string(&mut self, number: u32, value: &str) -> &mut Self {
        self.bytes(number, value.as_bytes())
    }

    /// A packed repeated varint field (one length-delimited run).
    pub fn packed_varints(&mut self, number: u32, values: &[u64]) -> &mut Self {
        let mut run = Vec::new();
        for v in values {
            push_varint(&mut run, *v);
        }
        self.bytes(number, &run)
    }

    /// A nested message built by `build`.
    pub fn message(&mut self, number: u32, build: impl FnOnce(&mut Encoder)) -> &mut Self {
        let mut inner = Encoder::new();
        build(&mut inner);
        self.bytes(number, &inner.buf)
    }

    /// Write any decoded value back, so a walker's output can be re-encoded.
    pub fn value(&mut self, number: u32, value: &Value<'_>) -> &mut Self {
        match *value {
            Value::Varint(v) => self.varint(number, v),
            Value::Fixed64(v) => self.fixed64(number, v),
            Value::Len(b) => self.bytes(number, b),
            Value::Fixed32(v) => self.fixed32(number, v),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

fn push_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_replaces_or_drops_the_fields_edited_and_copies_the_rest() {
        let mut e = Encoder::new();
        e.varint(1, 7).string(2, "old").fixed32(3, 9).fixed64(4, 5);
        let buf = e.finish();
        let out = rewrite(&buf, |out, number, _| match number {
            2 => {
                out.string(2, "new");
                Some(true)
            }
            3 => Some(true),
            _ => Some(false),
        });
        let mut want = Encoder::new();
        want.varint(1, 7).string(2, "new").fixed64(4, 5);
        assert_eq!(out, Some(want.finish()));
        assert_eq!(rewrite(&buf, |_, n, _| (n != 4).then_some(false)), None);
        assert_eq!(rewrite(&[0x0a, 0xff], |_, _, _| Some(false)), None);
    }

    #[test]
    fn ten_byte_varint_carries_64_bits() {
        let mut e = Encoder::new();
        e.varint(1, u64::MAX);
        let buf = e.finish();
        assert_eq!(buf.len(), 11);
        let f = fields(&buf).next().unwrap().unwrap();
        assert_eq!(f.value, Value::Varint(u64::MAX));
    }

    #[test]
    fn eleven_byte_varint_is_overlong() {
        let mut buf = vec![0x08];
        buf.extend(std::iter::repeat_n(0xff, 10));
        buf.push(0x01);
        assert_eq!(
            fields(&buf).next(),
            Some(Err(WireError::OverlongVarint { offset: 1 }))
        );
    }

    #[test]
    fn groups_and_reserved_wire_types_are_errors() {
        for (byte, group) in [(0x0b, true), (0x0c, true), (0x0e, false), (0x0f, false)] {
            let err = fields(&[byte, 0]).next().unwrap().unwrap_err();
            match err {
                WireError::Group { .. } => assert!(group),
                WireError::InvalidWireType { .. } => assert!(!group),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn length_past_end_is_reported() {
        let buf = [0x0a, 0x05, b'a'];
        assert_eq!(
            fields(&buf).next(),
            Some(Err(WireError::LengthOverrun {
                offset: 1,
                len: 5,
                available: 1
            }))
        );
    }

    #[test]
    fn errors_stop_iteration() {
        let buf = [0x0b, 0x0b, 0x0b];
        assert_eq!(fields(&buf).count(), 1);
    }
}

//! [`Value`]: a plain value received in place.

use std::ops::Deref;

use zerocopy::{FromBytes, Immutable, KnownLayout};

use crate::error::RecvError;
use crate::seam::Message;

/// A plain value received in place, from [`Receiver::recv_value`](crate::Receiver::recv_value): derefs to the `T` the
/// message holds. On shared memory it is read where the frame lies (frames are 8-byte
/// aligned); a value whose alignment the message's bytes do not meet (a type aligned past 8,
/// a message that came in fragments or over the ipc-channel backend) is copied out once
/// instead. The message goes back to the channel when this drops.
pub struct Value<G, T> {
    held: Held<G, T>,
}

enum Held<G, T> {
    /// The message, whose bytes were checked to be `size_of::<T>()` long and aligned for `T`.
    InPlace(G),
    /// A copy, where the bytes were not aligned for `T`.
    Copied(T),
}

impl<G: Message, T: FromBytes + KnownLayout + Immutable> Value<G, T> {
    /// The value `guard` holds: in place if its bytes are aligned for `T`, else a copy;
    /// [`RecvError::WrongSize`] if they are not exactly one `T` long (the message is
    /// consumed).
    pub(crate) fn new(guard: G) -> Result<Value<G, T>, RecvError> {
        let bytes: &[u8] = &guard;
        // zerocopy's own checks: `ref_from_bytes` takes exactly `size_of::<T>()` bytes aligned
        // for `T` (what `deref` relies on), `read_from_bytes` exactly that many anywhere.
        let held = if T::ref_from_bytes(bytes).is_ok() {
            Held::InPlace(guard)
        } else {
            match T::read_from_bytes(bytes) {
                Ok(value) => Held::Copied(value),
                Err(_) => {
                    return Err(RecvError::WrongSize {
                        channel: guard.channel().clone(),
                        len: bytes.len(),
                        expected: std::mem::size_of::<T>(),
                    })
                }
            }
        };
        Ok(Value { held })
    }
}

impl<G: Message, T: FromBytes + KnownLayout + Immutable> Deref for Value<G, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        match &self.held {
            Held::InPlace(guard) => {
                let bytes: &[u8] = guard;
                // SAFETY: `Value::new` checked, with `T::ref_from_bytes`, these bytes (the
                // same ones: a `Message` derefs to the same bytes at the same address while it
                // lives) to be exactly `size_of::<T>()` long and aligned for `T`;
                // `T: FromBytes` makes every bit pattern a valid `T`, and `T: Immutable` has no
                // interior mutability, so a shared reference for the guard's borrow is sound.
                // (The peer can write a frame read in place; as with the guard's own bytes, it
                // can change the value read, never make it invalid.)
                unsafe { &*bytes.as_ptr().cast::<T>() }
            }
            Held::Copied(value) => value,
        }
    }
}

impl<G: Message, T: FromBytes + KnownLayout + Immutable + std::fmt::Debug> std::fmt::Debug
    for Value<G, T>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ChannelName;

    /// Bytes lent as a message of the channel "t".
    struct Lent<'a>(&'a [u8], ChannelName);

    impl Deref for Lent<'_> {
        type Target = [u8];
        fn deref(&self) -> &[u8] {
            self.0
        }
    }

    impl crate::seam::Sealed for Lent<'_> {}

    impl Message for Lent<'_> {
        fn json<'de, T: serde::Deserialize<'de>>(&'de self) -> Result<T, RecvError> {
            unreachable!("not decoded here")
        }
        fn channel(&self) -> &ChannelName {
            &self.1
        }
    }

    fn lent(bytes: &[u8]) -> Lent<'_> {
        Lent(bytes, ChannelName::from("t"))
    }

    /// Eight bytes at an address aligned for `u64` and at one that is not: the first is read
    /// in place, the second copied out, and both give the same value; any other length is
    /// `WrongSize`.
    #[test]
    fn a_value_is_read_in_place_where_aligned_and_copied_where_not() {
        let words = [0u64, 0x0102_0304_0506_0708, 0];
        let bytes: &[u8] = zerocopy::IntoBytes::as_bytes(&words[..]);
        let aligned = &bytes[8..16];
        let value = Value::<Lent, u64>::new(lent(aligned)).unwrap();
        assert!(matches!(value.held, Held::InPlace(_)));
        assert!(std::ptr::eq(&*value, &words[1]), "read where the bytes lie");
        let mut backing = [0u64; 3];
        let shifted = zerocopy::IntoBytes::as_mut_bytes(&mut backing[..]);
        shifted[1..9].copy_from_slice(aligned);
        let value = Value::<Lent, u64>::new(lent(&shifted[1..9])).unwrap();
        assert!(matches!(value.held, Held::Copied(_)));
        assert_eq!(*value, 0x0102_0304_0506_0708);
        for len in [0, 7, 9, 16] {
            assert!(matches!(
                Value::<Lent, u64>::new(lent(&bytes[..len])),
                Err(RecvError::WrongSize { expected: 8, .. })
            ));
        }
    }
}

//! PostgreSQL's binary COPY format, on top of [`CopyIn`] and [`CopyOut`]: rows encoded with
//! `ToSql` and decoded with `FromSql`, column types given by the caller (the format carries
//! none).
//!
//! Format: an 11-byte signature, a 32-bit flags field and a header-extension length; then per
//! row a 16-bit field count and per field a 32-bit length (-1 for NULL) and the value in the
//! type's binary send format; then a 16-bit -1.

use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use postgres_types::{FromSql, IsNull, ToSql, Type};

use crate::copy::{CopyIn, CopyOut, CHUNK};
use crate::error::BoxError;
use crate::Error;

const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";
const HEADER_LEN: usize = SIGNATURE.len() + 8;

/// Writes rows to `COPY ... FROM STDIN (FORMAT binary)`.
pub struct BinaryCopyInWriter<'a> {
    copy: CopyIn<'a>,
    types: Vec<Type>,
    buf: BytesMut,
}

impl<'a> BinaryCopyInWriter<'a> {
    /// Wraps a started COPY whose columns have `types`, in order.
    pub fn new(copy: CopyIn<'a>, types: &[Type]) -> Self {
        let mut buf = BytesMut::with_capacity(CHUNK + 1024);
        buf.extend_from_slice(SIGNATURE);
        buf.put_i32(0); // flags
        buf.put_i32(0); // header extension length
        BinaryCopyInWriter {
            copy,
            types: types.to_vec(),
            buf,
        }
    }

    /// Encodes one row (one value per column type) and sends full chunks as they fill.
    pub async fn write(&mut self, row: &[&(dyn ToSql + Sync)]) -> Result<(), Error> {
        if row.len() != self.types.len() {
            return Err(Error::ParamCount {
                expected: self.types.len(),
                given: row.len(),
            });
        }
        let start = self.buf.len();
        if let Err(e) = encode_row(&self.types, row, &mut self.buf) {
            // Nothing half-encoded stays behind.
            self.buf.truncate(start);
            return Err(e);
        }
        if self.buf.len() >= CHUNK {
            // Written out, then reused: one buffer for the whole COPY.
            self.copy.write(&self.buf).await?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Ends the data and returns the number of rows copied.
    pub async fn finish(mut self) -> Result<u64, Error> {
        self.buf.put_i16(-1);
        self.copy.write(&self.buf).await?;
        self.copy.finish().await
    }
}

fn encode_row(
    types: &[Type],
    row: &[&(dyn ToSql + Sync)],
    buf: &mut BytesMut,
) -> Result<(), Error> {
    buf.put_i16(types.len() as i16);
    for (index, (value, ty)) in row.iter().zip(types).enumerate() {
        let at = buf.len();
        buf.put_i32(0);
        let encode = |source: BoxError| Error::Encode {
            index,
            ty: ty.to_string(),
            source,
        };
        let len = match value.to_sql_checked(ty, buf).map_err(encode)? {
            IsNull::Yes => -1,
            IsNull::No => i32::try_from(buf.len() - at - 4)
                .map_err(|_| encode("value longer than 2 GiB".into()))?,
        };
        buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }
    Ok(())
}

/// Reads rows from `COPY ... TO STDOUT (FORMAT binary)`.
pub struct BinaryCopyOutStream<'a> {
    copy: CopyOut<'a>,
    types: Arc<[Type]>,
    buf: BytesMut,
    header: bool,
    ended: bool,
}

impl<'a> BinaryCopyOutStream<'a> {
    /// Wraps a started COPY whose columns have `types`, in order.
    pub fn new(copy: CopyOut<'a>, types: &[Type]) -> Self {
        BinaryCopyOutStream {
            copy,
            types: Arc::from(types),
            buf: BytesMut::new(),
            header: false,
            ended: false,
        }
    }

    /// The next row; `None` after the last.
    pub async fn next(&mut self) -> Option<Result<BinaryCopyRow, Error>> {
        futures_lite::future::poll_fn(|cx| self.poll_row(cx)).await
    }

    fn poll_row(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<BinaryCopyRow, Error>>> {
        loop {
            if !self.ended {
                match self.parse() {
                    Ok(Some(row)) => return Poll::Ready(Some(Ok(row))),
                    Ok(None) => {}
                    Err(e) => return Poll::Ready(Some(Err(e))),
                }
            }
            let chunk = std::task::ready!(futures_lite::Stream::poll_next(
                Pin::new(&mut self.copy),
                cx
            ));
            let end = match chunk {
                Some(Ok(chunk)) => {
                    self.buf.extend_from_slice(&chunk);
                    continue;
                }
                Some(Err(e)) => Some(Err(e)),
                None if self.ended && self.buf.is_empty() => None,
                None => Some(Err(malformed("the data ended inside a row"))),
            };
            return Poll::Ready(end);
        }
    }

    /// One row from the buffer, if it holds a whole one.
    fn parse(&mut self) -> Result<Option<BinaryCopyRow>, Error> {
        if !self.header {
            if self.buf.len() < HEADER_LEN {
                return Ok(None);
            }
            if &self.buf[..SIGNATURE.len()] != SIGNATURE {
                return Err(malformed("no binary COPY signature"));
            }
            let ext = i32::from_be_bytes([self.buf[15], self.buf[16], self.buf[17], self.buf[18]]);
            let ext = usize::try_from(ext).map_err(|_| malformed("negative header extension"))?;
            if self.buf.len() < HEADER_LEN + ext {
                return Ok(None);
            }
            self.buf.advance(HEADER_LEN + ext);
            self.header = true;
        }
        if self.buf.len() < 2 {
            return Ok(None);
        }
        let count = i16::from_be_bytes([self.buf[0], self.buf[1]]);
        if count == -1 {
            self.buf.advance(2);
            self.ended = true;
            return Ok(None);
        }
        if usize::try_from(count).ok() != Some(self.types.len()) {
            return Err(malformed(
                "a row's field count differs from the given types",
            ));
        }
        let mut pos = 2;
        let mut ranges = Vec::with_capacity(self.types.len());
        for _ in 0..self.types.len() {
            let Some(len) = self.buf.get(pos..pos + 4) else {
                return Ok(None);
            };
            let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
            pos += 4;
            if len < 0 {
                ranges.push(None);
                continue;
            }
            let end = pos + len as usize;
            if self.buf.len() < end {
                return Ok(None);
            }
            ranges.push(Some(pos..end));
            pos = end;
        }
        Ok(Some(BinaryCopyRow {
            data: self.buf.split_to(pos).freeze(),
            ranges,
            types: self.types.clone(),
        }))
    }

    /// Rows copied, once the data has ended.
    pub fn rows_copied(&self) -> Option<u64> {
        self.copy.rows_copied()
    }
}

/// The rows as a stream (`futures::TryStreamExt::try_collect` and the like).
impl futures_lite::Stream for BinaryCopyOutStream<'_> {
    type Item = Result<BinaryCopyRow, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_row(cx)
    }
}

/// One row of binary COPY data, decoded on access like [`crate::Row`].
#[derive(Debug, Clone)]
pub struct BinaryCopyRow {
    data: Bytes,
    ranges: Vec<Option<Range<usize>>>,
    types: Arc<[Type]>,
}

impl BinaryCopyRow {
    /// Decodes column `idx`.
    ///
    /// # Panics
    /// If the index is out of range or the value does not decode; see [`BinaryCopyRow::try_get`].
    pub fn get<'a, T: FromSql<'a>>(&'a self, idx: usize) -> T {
        match self.try_get(idx) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }

    /// Decodes column `idx`, or says why not.
    pub fn try_get<'a, T: FromSql<'a>>(&'a self, idx: usize) -> Result<T, Error> {
        let (ty, range) = self
            .types
            .get(idx)
            .zip(self.ranges.get(idx))
            .ok_or_else(|| Error::ColumnNotFound(idx.to_string()))?;
        let column = || idx.to_string();
        if !T::accepts(ty) {
            return Err(Error::Decode {
                column: column(),
                source: format!("cannot decode {ty} as {}", std::any::type_name::<T>()).into(),
            });
        }
        let raw = range.clone().map(|r| &self.data[r]);
        T::from_sql_nullable(ty, raw).map_err(|source| Error::Decode {
            column: column(),
            source,
        })
    }

    /// Columns in the row.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether the row has no columns.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

fn malformed(what: &str) -> Error {
    Error::Protocol(format!("binary COPY data: {what}"))
}

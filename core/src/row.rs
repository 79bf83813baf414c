//! Rows as the server sent them, decoded one column at a time when a caller reads it.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use postgres_types::{FromSql, Type, WrongType};

use crate::Error;

/// A result column: its name and PostgreSQL type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    name: String,
    type_: Type,
}

impl Column {
    /// Makes a column description.
    pub(crate) fn new(name: String, type_: Type) -> Column {
        Column { name, type_ }
    }
    /// The column's name as the server reported it.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The column's type.
    pub fn type_(&self) -> &Type {
        &self.type_
    }
}

/// One result row. It keeps the raw DataRow bytes (sharing the connection's read buffer, no copy)
/// and decodes a column only when it is read with [`Row::get`] or [`Row::try_get`].
#[derive(Clone)]
pub struct Row {
    columns: Arc<[Column]>,
    /// The DataRow body after its 2-byte column count: `[len: i32][bytes]...` per column.
    values: Bytes,
    count: u16,
}

impl Row {
    /// Wraps a DataRow body (starting at its 2-byte column count). Returns `None` if the count
    /// does not match the row description.
    pub(crate) fn new(columns: Arc<[Column]>, mut body: Bytes) -> Option<Row> {
        if body.len() < 2 {
            return None;
        }
        let count = u16::from_be_bytes([body[0], body[1]]);
        if usize::from(count) != columns.len() {
            return None;
        }
        bytes::Buf::advance(&mut body, 2);
        Some(Row {
            columns,
            values: body,
            count,
        })
    }

    /// The same values described by `columns` (the same names, with completed types).
    pub(crate) fn with_columns(self, columns: Arc<[Column]>) -> Row {
        Row { columns, ..self }
    }

    /// The columns of this row.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether the row has no columns.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Decodes a column by index or name.
    ///
    /// # Panics
    /// Panics with a message naming the column if it does not exist, is NULL for a non-`Option`
    /// type, or cannot be decoded into `T`. Use [`Row::try_get`] to get an error instead.
    #[track_caller]
    pub fn get<'a, I, T>(&'a self, idx: I) -> T
    where
        I: RowIndex + fmt::Display,
        T: FromSql<'a>,
    {
        match self.try_get(&idx) {
            Ok(v) => v,
            Err(e) => panic!("error reading column {idx}: {e}"),
        }
    }

    /// Decodes a column by index or name, returning an error instead of panicking.
    pub fn try_get<'a, I, T>(&'a self, idx: I) -> Result<T, Error>
    where
        I: RowIndex + fmt::Display,
        T: FromSql<'a>,
    {
        let i = idx
            .index(&self.columns)
            .ok_or_else(|| Error::ColumnNotFound(idx.to_string()))?;
        let col = &self.columns[i];
        if !T::accepts(&col.type_) {
            return Err(Error::Decode {
                column: col.name.clone(),
                source: Box::new(WrongType::new::<T>(col.type_.clone())),
            });
        }
        let raw = self.raw(i).map_err(|e| Error::Decode {
            column: col.name.clone(),
            source: e.into(),
        })?;
        T::from_sql_nullable(&col.type_, raw).map_err(|source| Error::Decode {
            column: col.name.clone(),
            source,
        })
    }

    /// The raw binary value of column `i` (`None` for NULL). Walks the length headers up to `i`:
    /// rows are narrow in practice, and this keeps a row free of per-row index allocations.
    pub fn raw(&self, i: usize) -> Result<Option<&[u8]>, &'static str> {
        let mut at = 0usize;
        let buf = &self.values[..];
        for col in 0..=i {
            let head = buf.get(at..at + 4).ok_or("truncated DataRow")?;
            let len = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            at += 4;
            if len < 0 {
                if col == i {
                    return Ok(None);
                }
                continue;
            }
            let end = at + len as usize;
            if col == i {
                return buf.get(at..end).map(Some).ok_or("truncated DataRow");
            }
            at = end;
        }
        Err("column index out of range")
    }
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Row")
            .field("columns", &self.columns)
            .field("bytes", &self.values.len())
            .finish()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A column index: a position (`usize`) or a column name (`&str`, `String`).
pub trait RowIndex: sealed::Sealed {
    /// The position of this index among `columns`, if present.
    fn index(&self, columns: &[Column]) -> Option<usize>;
}

impl sealed::Sealed for usize {}
impl RowIndex for usize {
    fn index(&self, columns: &[Column]) -> Option<usize> {
        (*self < columns.len()).then_some(*self)
    }
}

impl sealed::Sealed for str {}
impl RowIndex for str {
    fn index(&self, columns: &[Column]) -> Option<usize> {
        columns.iter().position(|c| c.name == self).or_else(|| {
            columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(self))
        })
    }
}

impl sealed::Sealed for String {}
impl RowIndex for String {
    fn index(&self, columns: &[Column]) -> Option<usize> {
        self.as_str().index(columns)
    }
}

impl<T: ?Sized + sealed::Sealed> sealed::Sealed for &T {}
impl<T: ?Sized + RowIndex> RowIndex for &T {
    fn index(&self, columns: &[Column]) -> Option<usize> {
        (**self).index(columns)
    }
}

/// One result of a session's `simple_query`, in the server's order: a row of the statement
/// running, or the end of a statement with its affected-row count.
#[derive(Debug)]
#[non_exhaustive]
pub enum SimpleQueryMessage {
    /// A row, its values as text.
    Row(SimpleQueryRow),
    /// A statement completed, with the count its command tag carries (0 when none).
    CommandComplete(u64),
}

/// A row of a simple query: its values as the server formats them in text.
#[derive(Debug, Clone)]
pub struct SimpleQueryRow {
    row: Row,
}

impl SimpleQueryRow {
    pub(crate) fn new(row: Row) -> SimpleQueryRow {
        SimpleQueryRow { row }
    }

    /// The row's columns.
    pub fn columns(&self) -> &[Column] {
        self.row.columns()
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.row.len()
    }

    /// Whether the row has no values.
    pub fn is_empty(&self) -> bool {
        self.row.is_empty()
    }

    /// The value of column `idx` as text, or `None` for NULL.
    ///
    /// # Panics
    /// Panics if the column does not exist or its value is not UTF-8; [`SimpleQueryRow::try_get`]
    /// returns an error instead.
    #[track_caller]
    pub fn get(&self, idx: usize) -> Option<&str> {
        match self.try_get(idx) {
            Ok(v) => v,
            Err(e) => panic!("error reading column {idx}: {e}"),
        }
    }

    /// The value of column `idx` as text (`None` for NULL), or why it cannot be read.
    pub fn try_get(&self, idx: usize) -> Result<Option<&str>, Error> {
        let name = || {
            self.columns()
                .get(idx)
                .map_or_else(|| idx.to_string(), |c| c.name().to_owned())
        };
        if idx >= self.len() {
            return Err(Error::ColumnNotFound(idx.to_string()));
        }
        let raw = self.row.raw(idx).map_err(|e| Error::Decode {
            column: name(),
            source: e.into(),
        })?;
        raw.map(std::str::from_utf8)
            .transpose()
            .map_err(|e| Error::Decode {
                column: name(),
                source: Box::new(e),
            })
    }
}

#ifndef FEEDD_GATHERING_VFS_H
#define FEEDD_GATHERING_VFS_H

/// The name of an SQLite VFS, registered on the first call, that gathers the writes to each
/// write-ahead log into few large ones; NULL if SQLite has no default VFS to build it on.
///
/// It is the default VFS (unix) for every file but a WAL: the database, its shared memory and any
/// journal are the default VFS's own files. A WAL's writes that follow one another wait in a
/// buffer of at most FEEDD_GATHERED_BYTES, and go to the file in one write when the next write
/// does not follow them, when the buffer is full, or before SQLite does anything to the file
/// that could see them: a read of the buffered range, a sync, its size, a truncation, a file
/// control, closing it. SQLite writes a frame as two writes (its 24-byte header, then the page),
/// so a commit of N pages costs about N * 4 KiB / FEEDD_GATHERED_BYTES writes instead of 2 * N.
///
/// Durability: a connection opened with this VFS must run with `synchronous = FULL`. Then every
/// commit syncs the WAL, which writes the buffer first, before SQLite makes the commit visible
/// (in the wal-index) or reports it done; with NORMAL or OFF a commit would be visible to other
/// connections while its frames were still in the buffer. A write that fails when the buffer goes
/// to the file fails the call that sent it (the commit's sync, say) with the write's own error
/// (SQLITE_FULL for a full disk), so SQLite rolls the transaction back: nothing is confirmed that
/// is not written.
const char *feedd_gathering_vfs_name(void);

/// The most bytes of a WAL's writes that wait in its buffer: the most the default VFS writes in
/// one call (its unixWrite masks the length with 0x1ffff: a longer write would fail).
#define FEEDD_GATHERED_BYTES 0x1ffff

#endif

#include "gathering_vfs.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/// A WAL file: the default VFS's file (allocated right after this struct, in the space SQLite
/// gives every file of the VFS) and the writes that have not reached it yet.
typedef struct GatheringFile {
    sqlite3_file base;
    sqlite3_file *file;
    /// FEEDD_GATHERED_BYTES, allocated at the first write; the bytes of [start, start + count) of the file.
    unsigned char *buffer;
    sqlite3_int64 start;
    int count;
} GatheringFile;

static sqlite3_vfs *defaultVFS;
static sqlite3_vfs gatheringVFS;

/// Writes the buffer to the file; empty afterwards whatever happened, since SQLite rolls back
/// the transaction whose frames a failed write carried.
static int sendBuffer(GatheringFile *gathering) {
    if (gathering->count == 0) return SQLITE_OK;
    int status = gathering->file->pMethods->xWrite(gathering->file, gathering->buffer, gathering->count, gathering->start);
    gathering->count = 0;
    return status;
}

static int gatheringWrite(sqlite3_file *base, const void *bytes, int count, sqlite3_int64 offset) {
    GatheringFile *gathering = (GatheringFile *)base;
    int follows = gathering->count > 0 && offset == gathering->start + gathering->count;
    if (!follows || gathering->count + count > FEEDD_GATHERED_BYTES) {
        int status = sendBuffer(gathering);
        if (status != SQLITE_OK) return status;
        gathering->start = offset;
    }
    if (gathering->buffer == NULL) gathering->buffer = malloc(FEEDD_GATHERED_BYTES);
    if (count > FEEDD_GATHERED_BYTES || gathering->buffer == NULL) {
        return gathering->file->pMethods->xWrite(gathering->file, bytes, count, offset);
    }
    memcpy(gathering->buffer + gathering->count, bytes, (size_t)count);
    gathering->count += count;
    return SQLITE_OK;
}

static int gatheringRead(sqlite3_file *base, void *bytes, int count, sqlite3_int64 offset) {
    GatheringFile *gathering = (GatheringFile *)base;
    if (gathering->count > 0 && offset < gathering->start + gathering->count && offset + count > gathering->start) {
        int status = sendBuffer(gathering);
        if (status != SQLITE_OK) return status;
    }
    return gathering->file->pMethods->xRead(gathering->file, bytes, count, offset);
}

static int gatheringSync(sqlite3_file *base, int flags) {
    GatheringFile *gathering = (GatheringFile *)base;
    int status = sendBuffer(gathering);
    return status != SQLITE_OK ? status : gathering->file->pMethods->xSync(gathering->file, flags);
}

static int gatheringTruncate(sqlite3_file *base, sqlite3_int64 size) {
    GatheringFile *gathering = (GatheringFile *)base;
    int status = sendBuffer(gathering);
    return status != SQLITE_OK ? status : gathering->file->pMethods->xTruncate(gathering->file, size);
}

static int gatheringFileSize(sqlite3_file *base, sqlite3_int64 *size) {
    GatheringFile *gathering = (GatheringFile *)base;
    int status = sendBuffer(gathering);
    return status != SQLITE_OK ? status : gathering->file->pMethods->xFileSize(gathering->file, size);
}

static int gatheringFileControl(sqlite3_file *base, int operation, void *argument) {
    GatheringFile *gathering = (GatheringFile *)base;
    int status = sendBuffer(gathering);
    return status != SQLITE_OK ? status : gathering->file->pMethods->xFileControl(gathering->file, operation, argument);
}

static int gatheringClose(sqlite3_file *base) {
    GatheringFile *gathering = (GatheringFile *)base;
    int status = sendBuffer(gathering);
    int closed = gathering->file->pMethods->xClose(gathering->file);
    free(gathering->buffer);
    gathering->buffer = NULL;
    return status != SQLITE_OK ? status : closed;
}

// The rest see no data: they go straight to the default VFS's file.

static int gatheringLock(sqlite3_file *base, int level) {
    sqlite3_file *file = ((GatheringFile *)base)->file;
    return file->pMethods->xLock(file, level);
}

static int gatheringUnlock(sqlite3_file *base, int level) {
    sqlite3_file *file = ((GatheringFile *)base)->file;
    return file->pMethods->xUnlock(file, level);
}

static int gatheringCheckReservedLock(sqlite3_file *base, int *reserved) {
    sqlite3_file *file = ((GatheringFile *)base)->file;
    return file->pMethods->xCheckReservedLock(file, reserved);
}

static int gatheringSectorSize(sqlite3_file *base) {
    sqlite3_file *file = ((GatheringFile *)base)->file;
    return file->pMethods->xSectorSize(file);
}

static int gatheringDeviceCharacteristics(sqlite3_file *base) {
    sqlite3_file *file = ((GatheringFile *)base)->file;
    return file->pMethods->xDeviceCharacteristics(file);
}

static int gatheringShmMap(sqlite3_file *base, int region, int size, int extend, void volatile **memory) {
    sqlite3_file *file = ((GatheringFile *)base)->file;
    return file->pMethods->xShmMap(file, region, size, extend, memory);
}

static int gatheringShmLock(sqlite3_file *base, int offset, int count, int flags) {
    sqlite3_file *file = ((GatheringFile *)base)->file;
    return file->pMethods->xShmLock(file, offset, count, flags);
}

static void gatheringShmBarrier(sqlite3_file *base) {
    sqlite3_file *file = ((GatheringFile *)base)->file;
    file->pMethods->xShmBarrier(file);
}

static int gatheringShmUnmap(sqlite3_file *base, int delete) {
    sqlite3_file *file = ((GatheringFile *)base)->file;
    return file->pMethods->xShmUnmap(file, delete);
}

// Memory-mapped reads would read past the buffer: a WAL is never mapped (SQLite maps only the
// database file), and these say so should it ask.
static int gatheringFetch(sqlite3_file *base, sqlite3_int64 offset, int count, void **pages) {
    (void)base, (void)offset, (void)count;
    *pages = NULL;
    return SQLITE_OK;
}

static int gatheringUnfetch(sqlite3_file *base, sqlite3_int64 offset, void *pages) {
    (void)base, (void)offset, (void)pages;
    return SQLITE_OK;
}

static const sqlite3_io_methods gatheringMethods = {
    .iVersion = 3,
    .xClose = gatheringClose,
    .xRead = gatheringRead,
    .xWrite = gatheringWrite,
    .xTruncate = gatheringTruncate,
    .xSync = gatheringSync,
    .xFileSize = gatheringFileSize,
    .xLock = gatheringLock,
    .xUnlock = gatheringUnlock,
    .xCheckReservedLock = gatheringCheckReservedLock,
    .xFileControl = gatheringFileControl,
    .xSectorSize = gatheringSectorSize,
    .xDeviceCharacteristics = gatheringDeviceCharacteristics,
    .xShmMap = gatheringShmMap,
    .xShmLock = gatheringShmLock,
    .xShmBarrier = gatheringShmBarrier,
    .xShmUnmap = gatheringShmUnmap,
    .xFetch = gatheringFetch,
    .xUnfetch = gatheringUnfetch,
};

static int gatheringOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *base, int flags, int *openedFlags) {
    (void)vfs;
    if (!(flags & SQLITE_OPEN_WAL)) return defaultVFS->xOpen(defaultVFS, name, base, flags, openedFlags);
    GatheringFile *gathering = (GatheringFile *)base;
    *gathering = (GatheringFile){.file = (sqlite3_file *)(gathering + 1)};
    int status = defaultVFS->xOpen(defaultVFS, name, gathering->file, flags, openedFlags);
    // SQLite closes a file whose methods are set even if opening it failed; so must this one.
    gathering->base.pMethods = gathering->file->pMethods != NULL ? &gatheringMethods : NULL;
    return status;
}

static void registerGatheringVFS(void) {
    defaultVFS = sqlite3_vfs_find(NULL);
    if (defaultVFS == NULL) return;
    // The default VFS's methods for everything but opening a file: they read nothing of the VFS
    // but fields copied with it (mxPathname, pAppData), and a file other than a WAL is theirs.
    gatheringVFS = *defaultVFS;
    gatheringVFS.zName = "feedd-gathering";
    gatheringVFS.szOsFile = (int)sizeof(GatheringFile) + defaultVFS->szOsFile;
    gatheringVFS.pNext = NULL;
    gatheringVFS.xOpen = gatheringOpen;
    if (sqlite3_vfs_register(&gatheringVFS, 0) != SQLITE_OK) defaultVFS = NULL;
}

const char *feedd_gathering_vfs_name(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, registerGatheringVFS);
    return defaultVFS != NULL ? gatheringVFS.zName : NULL;
}

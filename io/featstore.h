/* featstore.h - the HDF5 feature store: log-mel features of a whole speaker
 * corpus in one file, written by `ctrain prep voxceleb` and read by training.
 *
 * Layout (format_version 1). Root attributes:
 *   format          string "ctrain-features"
 *   format_version  int32  1
 *   n_mels          int32  mel bands per frame (40 by default)
 *   sample_rate     int32  16000
 *   frame_shift_ms  int32  10
 *   frame_length_ms int32  25
 *   dtype           string "float32" or "float16": the type of /feats, for people (readers look
 *                          at the dataset's own type; stores without it are float32)
 *   normalization   string "utterance_mean_var": every band normalised to zero mean and unit
 *                          variance over each utterance's frames (ct_fbank_normalize). Stores
 *                          written before this attribute existed lack it; they were made the
 *                          same way, and ct_featstore_read_settings reports them so.
 * Datasets (all 1-D or 2-D, chunked, unlimited along the first axis so that
 * prep can append):
 *   feats        float32 [total_frames, n_mels]  every utterance's frames, one after another;
 *                float16 (IEEE binary16, core/half.h) with `prep --dtype float16`: half the
 *                bytes, each value rounded to 11 significant bits and widened exactly on reading.
 *                Chunks of CT_FEATSTORE_CHUNK_FRAMES frames (stores by older ctrain: 8192 or
 *                1024; all read the same)
 *   utt_offset   int64   [n_utt]   first row of utterance u in feats
 *   utt_frames   int32   [n_utt]   its number of frames (>= 1)
 *   utt_speaker  int32   [n_utt]   index into speakers
 *   utt_video    int32   [n_utt]   index into videos
 *   utt_path     string  [n_utt]   path relative to the wav/ directory, "id10270/x6uYqmx31kE/00001.wav"
 *   speakers     string  [n_speakers]  speaker directory names, "id10270"
 *   videos       string  [n_videos]    video directory names (YouTube ids), "x6uYqmx31kE"; a video
 *                                      that appears under two speakers has one entry
 * Strings are variable-length, UTF-8. Utterances are stored in the order they
 * were appended (prep appends in sorted path order); speakers and videos in
 * the order of their first utterance. Any HDF5 tool reads it:
 *
 *   $ h5dump -n feats.h5
 *   HDF5 "feats.h5" {
 *   FILE_CONTENTS {
 *    group      /
 *    dataset    /feats
 *    dataset    /speakers
 *    dataset    /utt_frames
 *    dataset    /utt_offset
 *    dataset    /utt_path
 *    dataset    /utt_speaker
 *    dataset    /utt_video
 *    dataset    /videos
 *    }
 *   }
 *   $ h5dump -H feats.h5    (excerpt: 60 utterances of 3 speakers)
 *      ATTRIBUTE "format_version" { DATATYPE H5T_STD_I32LE  DATASPACE SCALAR }
 *      DATASET "feats" {
 *         DATATYPE  H5T_IEEE_F32LE
 *         DATASPACE  SIMPLE { ( 47880, 40 ) / ( H5S_UNLIMITED, 40 ) }
 *      DATASET "utt_offset" {
 *         DATATYPE  H5T_STD_I64LE
 *         DATASPACE  SIMPLE { ( 60 ) / ( H5S_UNLIMITED ) }
 *      DATASET "utt_path" {
 *         DATATYPE  H5T_STRING { STRSIZE H5T_VARIABLE; STRPAD H5T_STR_NULLTERM; CSET H5T_CSET_UTF8; ... }
 *         DATASPACE  SIMPLE { ( 60 ) / ( H5S_UNLIMITED ) }
 *   $ h5dump -d /utt_path -s 0 -c 2 feats.h5
 *         (0): "id10001/vida/00001.wav", "id10001/vida/00002.wav"
 *
 * Datasets are written without modification times, so the same appends give
 * the same bytes (prep's output does not depend on its thread count).
 *
 * Writing: ct_featstore_open creates the file or opens an existing one for
 * appending (checking that it is a store with the same n_mels);
 * ct_featstore_append queues one utterance in memory; ct_featstore_flush
 * writes the queue (feats, speakers, videos, then the utt_* datasets, utt_path
 * last) and calls H5Fflush; ct_featstore_close flushes and closes.
 *
 * What is guaranteed if the writer stops abruptly (killed, crashed):
 *   - after ct_featstore_flush returns, every utterance appended before it is
 *     in the file, and the file on disk is complete and readable (the data are
 *     in the operating system's hands: a killed process cannot lose them, a
 *     power cut before the kernel writes them back can);
 *   - a process that dies between flushes leaves the file as the last flush
 *     wrote it: HDF5 1.10 keeps new metadata in its cache until a flush, and
 *     new data only fill space that the flushed metadata does not yet count
 *     (tests/test_featstore.c kills a writer between batches and reloads).
 *     HDF5 itself does not promise this if its cache overflows in the middle
 *     of a very large batch, so prep flushes after every 16 utterances;
 *   - if a batch was cut short after some utt_* datasets had grown and not
 *     others, ct_featstore_open trims them back to the last complete utterance
 *     before appending (ct_featstore_load refuses such a file, saying so).
 *
 * Reading: ct_featstore_load fills a ct_corpus entirely; ct_featstore_open_corpus
 * loads it when the features fit a memory budget and otherwise streams them: the
 * corpus then holds the index alone, and a frame source (io/corpus.h) reads each
 * crop or utterance from the file when a batch asks for it. A crop of 100 frames
 * reads those 100 rows and no more (bytes read / bytes used = 1.00, against about
 * 11 through HDF5's default chunk cache with 1024-frame chunks), and the kernel is
 * told the reads are random (no read-ahead). On opening, the reader asks HDF5 where
 * each chunk of /feats lies in the file (the "chunk map"); a crop is then one
 * pread(2) of its bytes, with no HDF5 call and no lock, so any number of threads
 * read at once, and a batch announces all its crops before reading them
 * (posix_fadvise WILLNEED: on a cold page cache the disk gets the whole batch's
 * reads at once). Measured by bench/bench_loader on a 2 GiB store (2-core VM): a
 * batch of 128 pairs took 1.6-1.9 ms on one thread and 0.88 ms on two, against
 * 3.3-3.7 ms through H5Dread; 4.9-5.9 ms against 19-24 with the page cache dropped. Stores the map cannot describe exactly (compressed by h5repack, more than
 * CT_FEATSTORE_MAP_MAX_CHUNKS chunks, another file driver) are read through H5Dread
 * with the chunk cache off (the same floats; one read at a time). A file damaged
 * while it is read gives CT_EIO naming the file, the utterance and the frames. A file that is not a
 * store, another format_version, or sizes that do not agree (an offset beyond
 * feats, lengths that differ, an index out of range) give CT_EFORMAT with a
 * message naming the file and what is wrong.
 */
#ifndef CT_FEATSTORE_H
#define CT_FEATSTORE_H
#include "core/error.h"
#include "io/corpus.h"

#define CT_FEATSTORE_FORMAT  "ctrain-features"
#define CT_FEATSTORE_VERSION 1
#define CT_FEATSTORE_NORMALIZATION "utterance_mean_var"   /* what `ctrain prep` does: see above */
/* Frames per chunk of /feats in new stores (655 s of audio; 10 MiB at 40 mels, float32).
 * The chunk size does not change the bytes a crop reads (1.00 bytes per byte used with
 * 128, 1024 or 8192 frames, measured on 500 MB stores of 3,000 utterances:
 * bench/RESULTS.md, "training from a feature store larger than memory"). It sets how
 * many chunks the streamed reader must map (below): VoxCeleb2's dev set, about 850
 * million frames, is 13,000 chunks of 65,536 frames and would be 104,000 of 8,192
 * (ctrain's chunk before), too many to map. Measured on a 2 GiB store (2-core VM):
 * written in 7.4 s against 8.8 s with 8,192 frames, opened (index and map) in 0.03 s
 * against 0.05 s, batches read as fast. Through H5Dread (a store the map cannot
 * describe), a crop cost 35 us with 8192-frame chunks, 60-67 with 1024, 95-120 with
 * 128, on the same busy machine. */
#ifndef CT_FEATSTORE_CHUNK_FRAMES   /* (a build may set another to measure it) */
#define CT_FEATSTORE_CHUNK_FRAMES 65536
#endif

/* The most chunks the streamed reader maps (see above and featstore.c's map_chunks):
 * 320 GiB of float32 features at 40 mels in chunks of 65,536 frames, 40 GiB in the
 * 8,192-frame chunks of stores by ctrain before (repack a larger one with
 * `h5repack -l /feats:CHUNK=65536x40 old.h5 new.h5`). Mapping costs time quadratic in
 * the chunks with HDF5 1.10. */
#define CT_FEATSTORE_MAP_MAX_CHUNKS 32768

/* The element type of /feats. CT_FEAT_DEFAULT: float32 for a new store, and whatever
 * an existing store holds when appending. */
typedef enum { CT_FEAT_DEFAULT, CT_FEAT_FLOAT32, CT_FEAT_FLOAT16 } ct_feat_dtype;
const char *ct_feat_dtype_name(ct_feat_dtype t);             /* "float32", "float16" */
ct_status   ct_feat_dtype_parse(ct_feat_dtype *t, const char *name);

/* How a store's features were made (its root attributes). */
typedef struct {
    int n_mels, sample_rate, frame_length_ms, frame_shift_ms;
    char normalization[32];
    int normalization_recorded;   /* 0: an older store without the attribute (normalization is then CT_FEATSTORE_NORMALIZATION) */
} ct_featstore_settings;

typedef struct ct_featstore ct_featstore;

/* Opens `path` for appending, creating it when it does not exist. An existing
 * file must be a version-1 store with n_mels mel bands. */
ct_status ct_featstore_open(ct_featstore **w, const char *path, int n_mels);
/* The same with the element type of /feats: a new store is made with it (float32 for
 * CT_FEAT_DEFAULT); an existing store holding another type is refused (CT_EINVAL). */
ct_status ct_featstore_open_dtype(ct_featstore **w, const char *path, int n_mels, ct_feat_dtype dtype);
/* Utterances in the store, flushed or queued. */
int       ct_featstore_n_utt(const ct_featstore *w);
/* 1 if an utterance with this path (relative to wav/) is stored or queued. */
int       ct_featstore_has(const ct_featstore *w, const char *rel_path);
/* Queues one utterance: feats [frames, n_mels]; speaker and video are names
 * ("id10270", "x6uYqmx31kE"); rel_path must not be stored already. */
ct_status ct_featstore_append(ct_featstore *w, const char *rel_path, const char *speaker, const char *video,
                              const float *feats, int frames);
/* Writes everything queued, then H5Fflush. */
ct_status ct_featstore_flush(ct_featstore *w);
/* Flushes and closes; frees w whatever happens (NULL is allowed). */
ct_status ct_featstore_close(ct_featstore *w);

/* Reads only the feature settings of the store at `path` (any values: comparing
 * them is the caller's business). CT_EIO/CT_EFORMAT naming the file and the
 * attribute when it is not a readable store. */
ct_status ct_featstore_read_settings(const char *path, ct_featstore_settings *s);

/* Reads the store at `path` into *c (feats, utt[], n_speakers, n_mels, path[],
 * speaker_name[], video[]); free it with ct_corpus_free. On failure *c is empty. */
ct_status ct_featstore_load(ct_corpus *c, const char *path);

/* How a store was opened by ct_featstore_open_corpus. */
typedef struct {
    int streamed;                     /* 1: read from the file as needed; 0: loaded into memory */
    size_t budget;                    /* the memory budget, bytes */
    int budget_given;                 /* 1: --data-memory; 0: the default, half the memory available */
    int ranks_here;                   /* ranks of an MPI job on this machine: the default is shared among them */
    unsigned long long feat_bytes;    /* the features as float32: what loading takes */
    unsigned long long index_bytes;   /* about what streaming keeps in memory: the index and the paths */
    ct_feat_dtype dtype;              /* what the file holds */
    char no_map_why[200];             /* streamed: why crops go through H5Dread, not the chunk map ("": they do not) */
} ct_featstore_plan;

/* Opens the store for training or evaluation within `budget` bytes of memory (0: half
 * the memory available, divided among the ranks_here ranks of a job on this machine): loaded as ct_featstore_load does when its features and index
 * fit, else streamed (c->feats NULL, c->source reading from the file; ct_corpus_free
 * closes it). batch_bytes: what the loader's batches take besides; a budget too small
 * to stream with them is refused (CT_EINVAL with the size needed). Either way the
 * frames read are the same floats. */
ct_status ct_featstore_open_corpus(ct_corpus *c, const char *path, size_t budget, int ranks_here, size_t batch_bytes,
                                   ct_featstore_plan *plan);
/* Always streamed (what `eval` does: it reads only the utterances its trials name). */
ct_status ct_featstore_stream(ct_corpus *c, const char *path);
/* "loaded into memory (6.27 GB, ...)" or "streamed from the file (...)" into buf. */
const char *ct_featstore_plan_line(const ct_featstore_plan *p, char *buf, size_t cap);

/* What a streamed corpus's reader has read: reads, and bytes of frames as stored;
 * direct: 1 when it reads crops with pread(2) through its chunk map, 0 through H5Dread. */
typedef struct { unsigned long long reads, bytes; int direct; } ct_featstore_stats;
/* 1 and *s filled when c streams from a feature store, else 0. */
int ct_featstore_stats_of(const ct_corpus *c, ct_featstore_stats *s);

#endif

/* corpus.h - utterances of known speakers as feature matrices, and the pairs
 * the siamese model trains on.
 *
 * A corpus is, per utterance, its speaker and where its frames are, and the
 * frames themselves: either one float array [total_frames, n_mels] in memory
 * (`feats`), or a frame source that reads them on demand from a file (`source`:
 * a feature store too large for memory, io/featstore.h). Everything that needs
 * frames asks ct_corpus_frames, which serves both the same floats.
 *
 * The synthetic generator here makes one from a seed (speaker = a
 * characteristic spectral envelope and modulation, utterance = that plus
 * noise), so the engine can train and be tested with no audio at all; real
 * audio features fill the same struct.
 *
 * Pairs are drawn deterministically from an RNG: half same-speaker, half
 * different. A batch takes a random crop of T frames from each utterance of
 * each pair, drawn again whenever the batch is built (so every epoch sees new
 * crops). A pair sampler (ct_pair_sampler) groups the utterances by speaker
 * once, so that new pairs can be drawn every epoch in time proportional to
 * the pairs alone (train/speaker_task.h).
 */
#ifndef CT_CORPUS_H
#define CT_CORPUS_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "core/rng.h"
#include "core/workers.h"

typedef struct {
    int speaker;       /* 0 .. n_speakers-1 */
    int frames;        /* length of this utterance */
    size_t offset;     /* first frame in feats (or in the store's /feats when streamed), in floats */
} ct_utt;

/* Frames read on demand. read() copies frames [first, first + n) of utterance u
 * into dst [n, n_mels] as float32; it may be called from any thread (a source
 * serialises its own reads where it must). close() frees the source. hint()
 * (NULL: none) says those frames will be read soon, so that a source on a disk can
 * start reading a whole batch's crops at once; it changes no result. */
typedef struct ct_frame_source ct_frame_source;
struct ct_frame_source {
    ct_status (*read)(ct_frame_source *src, int u, int first, int n, float *dst);
    void      (*close)(ct_frame_source *src);
    void      (*hint)(ct_frame_source *src, int u, int first, int n);
};

typedef struct {
    int n_utt, n_speakers, n_mels;
    ct_utt *utt;       /* [n_utt] */
    float *feats;      /* [sum of frames, n_mels], or NULL when `source` reads them */
    ct_frame_source *source;   /* NULL when the frames are in feats; owned: ct_corpus_free closes it */
    /* Optional (NULL for synthetic corpora), all malloc'd and freed by ct_corpus_free: */
    char **path;           /* [n_utt] path relative to wav/, e.g. "id10270/x6uYqmx31kE/00001.wav" */
    char **speaker_name;   /* [n_speakers] e.g. "id10270" */
    int *video;            /* [n_utt] session/video index within the corpus, -1 if unknown */
} ct_corpus;

typedef struct {
    int speakers, utts_per_speaker;
    int min_frames, max_frames;
    int n_mels;
    float noise;       /* noise level relative to the speaker signal; larger is harder */
    uint64_t seed;
} ct_synth_config;

ct_status ct_corpus_synthetic(ct_corpus *c, const ct_synth_config *cfg);
void      ct_corpus_free(ct_corpus *c);

/* Frames [first, first + n) of utterance u into dst [n, n_mels], from memory or
 * from the source (whose errors name the file and the utterance). */
ct_status ct_corpus_frames(const ct_corpus *c, int u, int first, int n, float *dst);

/* Split the speakers: a seeded shuffle, the first n_train for training, the rest
 * for validation (disjoint speakers: open-set verification). train/val receive
 * speaker ids; each needs room for n_speakers. */
ct_status ct_corpus_split(int *train, int *n_train, int *val, int *n_val, const ct_corpus *c, double val_fraction, ct_rng *r);
/* The same over the S speakers speakers[0..S) (NULL: 0..S-1, which is ct_corpus_split); speakers
 * may be train or val: it is read before they are written. */
ct_status ct_speakers_split(int *train, int *n_train, int *val, int *n_val, const int *speakers, int S, double val_fraction,
                            ct_rng *r);

typedef struct { int a, b; float y; } ct_pair;   /* utterance indices; y = 1 same speaker */

/* n pairs over the given speakers, alternating same/different (so exactly half
 * same when n is even), order shuffled. Only utterances with allowed[u] != 0 are
 * used (allowed NULL: all). Needs >= 2 speakers, each with >= 2 allowed
 * utterances (else CT_EINVAL naming the speaker): filter with ct_usable_speakers. */
ct_status ct_pairs_draw(ct_pair *out, int n, const ct_corpus *c, const unsigned char *allowed,
                        const int *speakers, int n_speakers, ct_rng *r);

/* The same draws in two steps, for drawing again and again from the same speakers:
 * ct_pair_sampler_init groups the allowed utterances by speaker once, in O(utterances)
 * (with ct_pairs_draw's checks and errors); ct_pairs_sample then costs O(n) and reads
 * only the sampler, never the corpus. init, sample, free makes exactly the pairs of
 * ct_pairs_draw and leaves r where it does. */
typedef struct {
    int n_speakers;
    int *speakers;     /* [n_speakers] the corpus's ids of the speakers drawn from */
    int *count;        /* [corpus speakers] allowed utterances of each speaker */
    int *start;        /* [corpus speakers + 1] where each speaker's utterances begin in list */
    int *list;         /* [allowed utterances] utterance indices, grouped by speaker, in corpus order */
} ct_pair_sampler;

ct_status ct_pair_sampler_init(ct_pair_sampler *ps, const ct_corpus *c, const unsigned char *allowed,
                               const int *speakers, int n_speakers);
void      ct_pairs_sample(ct_pair *out, int n, const ct_pair_sampler *ps, ct_rng *r);
void      ct_pair_sampler_free(ct_pair_sampler *ps);

/* Keeps, in place, the speakers of speakers[0..*n) that have at least 2 allowed
 * utterances; prints one warning line per dropped speaker to `warn` (if not NULL). */
void ct_usable_speakers(int *speakers, int *n, const ct_corpus *c, const unsigned char *allowed, void *warn);

/* Held-out videos: for every speaker with utterances from >= 2 videos, one video
 * (drawn from r) goes to validation. val[u] = 1 for its utterances, 0 otherwise.
 * Needs c->video. */
ct_status ct_corpus_split_videos(unsigned char *val, const ct_corpus *c, ct_rng *r);

/* Name of a speaker for messages: its name if the corpus has names, else "speaker N" (static buffer). */
const char *ct_speaker_label(const ct_corpus *c, int s);

/* Fill x [2B, T, I] (rows [0,B) a-crops, [B,2B) b-crops) and y [B] from pairs
 * p[0..B). Utterances shorter than T are zero-padded and their length recorded
 * in len [2B] (T otherwise); longer ones give a random crop. The crops' starts
 * are drawn before any frame is read, so `crop` ends in the same state whether
 * the frames come from memory or from a source, and whether a read failed. */
ct_status ct_pairs_batch(float *x, int *len, float *y, const ct_pair *p, int B, const ct_corpus *c, int T, ct_rng *crop);
/* Pairs [lo, hi) of that batch only (one rank's part in data-parallel training):
 * x [2n, T, I] (rows [0,n) a-crops, [n,2n) b-crops), len [2n], y [n], n = hi - lo.
 * The crops of all B pairs are drawn, so `crop` ends where ct_pairs_batch leaves it
 * and each pair gets the crop it gets in the whole batch. */
ct_status ct_pairs_batch_part(float *x, int *len, float *y, const ct_pair *p, int B, int lo, int hi, const ct_corpus *c, int T,
                         ct_rng *crop);
/* The same part, its pairs read by `readers` threads of `pool` at once (contiguous
 * shares; at most CT_LOADER_MAX_READERS; pool NULL or readers 1: the caller alone).
 * Every reader draws the whole batch's crops from its own copy of `crop` and reads its
 * share, so x, len, y, where `crop` ends and any error are ct_pairs_batch_part's. The
 * frames must be in memory or come from a source that reads on several threads at once
 * (a feature store through its chunk map, io/featstore.h). */
#define CT_LOADER_MAX_READERS 16
ct_status ct_pairs_batch_pool(float *x, int *len, float *y, const ct_pair *p, int B, int lo, int hi, const ct_corpus *c, int T,
                              ct_rng *crop, ct_workers *pool, int readers);

#endif

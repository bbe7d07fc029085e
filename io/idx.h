/* idx.h - reader for the IDX files of MNIST and Fashion-MNIST, gzip-compressed
 * (.gz, read through zlib) or plain.
 *
 * IDX layout (all integers big-endian):
 *   bytes 0-1   zero
 *   byte  2     data type: 0x08 = unsigned byte (the only type these datasets use)
 *   byte  3     number of dimensions: 3 for images [n, rows, cols], 1 for labels [n]
 *   then        one uint32 per dimension, then the data, row-major
 * so the magic numbers are 0x00000803 (images) and 0x00000801 (labels).
 *
 * Everything is validated, and every failure names the file, says what is
 * wrong and what to do: the magic number and type byte, non-zero dimensions,
 * the byte count (the file must be exactly as long as its header says: a
 * truncated file and trailing bytes are both errors), images and labels
 * agreeing in count, every label below the class count. Pixels are scaled to
 * [0, 1] (byte / 255) into a ct_images with one channel.
 */
#ifndef CT_IDX_H
#define CT_IDX_H
#include "io/images.h"

#define CT_IDX_CLASSES 10                    /* MNIST and Fashion-MNIST */
#define CT_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"   /* Debian's dataset-fashion-mnist */

/* Images [n, 1, rows, cols] from an IDX image file; im->labels stays NULL. */
ct_status ct_idx_read_images(ct_images *im, const char *path);
/* Labels [n] from an IDX label file into a new malloc'd array (free it). */
ct_status ct_idx_read_labels(int **labels, int *n, const char *path);
/* An image file and its label file: counts must agree, labels must be < classes. */
ct_status ct_idx_load(ct_images *im, const char *images_path, const char *labels_path, int classes);

/* The four standard files of `dir`, each as NAME.gz or NAME:
 *   train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte
 * (10 classes; training and test images must have the same size). On failure
 * both sets are left empty. */
ct_status ct_idx_load_dir(ct_images *train, ct_images *test, const char *dir);

/* One split of `dir`: the training files (test = 0) or the t10k files (test = 1). */
ct_status ct_idx_load_split(ct_images *im, const char *dir, int test);

/* What `--data NAME` means: "fashion-mnist" -> CT_FASHION_MNIST_DIR, anything else is a directory. */
const char *ct_idx_data_dir(const char *data);

#endif

/* ember's stable C ABI (placeholder: version macros only; the stable-ABI issue fills this in).
 *
 * An extension built against ABI major M runs on every core offering ABI M.x with x >= the minor
 * it was built for. Entries are only ever appended within a major version.
 */
#ifndef EMBER_ABI_H
#define EMBER_ABI_H

#define EMBER_ABI_VERSION_MAJOR 1
#define EMBER_ABI_VERSION_MINOR 0

/* One integer for comparisons: major * 1000 + minor. */
#define EMBER_ABI_VERSION (EMBER_ABI_VERSION_MAJOR * 1000 + EMBER_ABI_VERSION_MINOR)

#endif /* EMBER_ABI_H */

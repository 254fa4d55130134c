/* version.h - qwenc's version, for --version and the hub's User-Agent. */
#ifndef QW_VERSION_H
#define QW_VERSION_H

#define QWENC_VERSION "0.2.0"

#endif

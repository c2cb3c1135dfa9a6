/* SPDX-License-Identifier: Apache-2.0 */
#ifndef CASCADE_VERSION_H
#define CASCADE_VERSION_H

#define CASCADE_VERSION "0.1.0"

#endif

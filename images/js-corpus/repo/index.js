'use strict';

/** The header line of a table: its column names joined by ` | `. */
exports.header = (cols) => cols.join(' | ');

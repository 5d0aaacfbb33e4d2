'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { header } = require('..');

test('header joins columns', () => {
  assert.strictEqual(header(['a', 'b']), 'a | b');
});

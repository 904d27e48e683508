package redisstore

import "github.com/redis/go-redis/v9"

// reserveScript counts one call in every counter it may read, at once
// (a script runs atomically: no other client's command runs in between).
//
// KEYS are the counters, distinct. ARGV[1] is the reservation's id; then,
// per key, four values: kind ("c" a rate limit's calls, "t" a token
// budget's tokens), the window in microseconds, a parameter (the most
// entries kept for "c", the bucket width in microseconds for "t") and what
// the call adds ("t": tokens, "0" for none).
//
// The time is the server's (TIME), in microseconds: one clock for every
// sidecar that shares the counters, whatever their own clocks say.
// The window is (now-window, now], as the local ledger's.
//
// It returns, per key, two strings: what the window held before this
// call, and for "t" the bucket field the tokens were added to ("" when
// none were).
//
// Numbers passed back to Redis are formatted with %.0f: Lua's own
// number-to-string conversion keeps 14 digits, and a time in microseconds
// has 16.
const reserveScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local id = ARGV[1]
local out = {}
for i, key in ipairs(KEYS) do
  local a = 2 + (i - 1) * 4
  local kind, window, param, add = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), ARGV[a + 3]
  local from = now - window
  local ttl = math.ceil(window / 1000)
  if kind == 'c' then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', from))
    local n = redis.call('ZCARD', key)
    if n > param then
      redis.call('ZREMRANGEBYRANK', key, 0, n - param - 1)
      n = param
    end
    redis.call('ZADD', key, string.format('%.0f', now), id)
    redis.call('PEXPIRE', key, ttl)
    out[#out + 1] = string.format('%.0f', n)
    out[#out + 1] = ''
  else
    local h = redis.call('HGETALL', key)
    local sum, kept = 0, 0
    for j = 1, #h, 2 do
      local w, b = string.match(h[j], '^(%d+):(%d+)$')
      if w == nil or (tonumber(b) + 1) * tonumber(w) <= from then
        redis.call('HDEL', key, h[j])
      else
        sum = sum + tonumber(h[j + 1])
        kept = kept + 1
      end
    end
    local field = ''
    if tonumber(add) > 0 then
      field = string.format('%.0f:%.0f', param, math.floor(now / param))
      redis.call('HINCRBYFLOAT', key, field, add)
    end
    if field ~= '' or kept > 0 then
      redis.call('PEXPIRE', key, ttl)
    end
    if sum < 0 then sum = 0 end
    out[#out + 1] = string.format('%.17g', sum)
    out[#out + 1] = field
  end
end
return out
`

// releaseScript takes back what one reservation added. KEYS are its
// counters; ARGV[1] its id; then, per key, three values: kind, the bucket
// field ("t") and the tokens added there. A bucket already gone (its
// window passed, or the key expired) is left gone: never recreated, never
// negative.
const releaseScript = `
local id = ARGV[1]
for i, key in ipairs(KEYS) do
  local a = 2 + (i - 1) * 3
  local kind, field, add = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  if kind == 'c' then
    redis.call('ZREM', key, id)
  elseif field ~= '' and redis.call('HEXISTS', key, field) == 1 then
    local left = redis.call('HINCRBYFLOAT', key, field, '-' .. add)
    if tonumber(left) <= 0 then
      redis.call('HDEL', key, field)
    end
  end
end
return 0
`

var (
	reserveLua = redis.NewScript(reserveScript)
	releaseLua = redis.NewScript(releaseScript)

	reserveRaw = luaScript{src: reserveScript, sha: reserveLua.Hash()}
	releaseRaw = luaScript{src: releaseScript, sha: releaseLua.Hash()}
)

// luaScript is a script as the Reserve and Release connections send it:
// EVALSHA with its SHA-1, EVAL with its source when the server lacks it.
type luaScript struct{ src, sha string }

-- Tiny assertion helper for the Lua binding tests. Every failing check
-- is reported with its location; done() prints "N passed, N failed" and
-- exits non-zero when anything failed.
local M = { passed = 0, failed = 0 }

local function report(ok, what)
  if ok then
    M.passed = M.passed + 1
  else
    M.failed = M.failed + 1
    local info = debug.getinfo(3, "Sl")
    io.stderr:write(string.format("FAIL %s:%d: %s\n", info.short_src, info.currentline, what))
  end
end

function M.ok(cond, what) report(cond, what or "condition is false") end

function M.eq(a, b, what) report(a == b, string.format("%s: got %s, expected %s", what or "eq", tostring(a), tostring(b))) end

-- |a - b| <= tol * max(1, |b|), elementwise over nested tables.
local function close(a, b, tol)
  if type(a) == "table" and type(b) == "table" then
    if #a ~= #b then return false, string.format("lengths %d and %d", #a, #b) end
    for i = 1, #a do
      local ok, why = close(a[i], b[i], tol)
      if not ok then return false, string.format("[%d]%s", i, why) end
    end
    return true
  end
  if type(a) ~= "number" or type(b) ~= "number" then
    return false, string.format(": %s vs %s", type(a), type(b))
  end
  local ok = math.abs(a - b) <= tol * math.max(1, math.abs(b))
  return ok, ok and "" or string.format(": %.10g vs %.10g", a, b)
end

function M.close(a, b, tol, what)
  local ok, why = close(a, b, tol or 1e-6)
  report(ok, (what or "close") .. " " .. (why or ""))
end

-- fn must raise an error whose message contains every given fragment.
function M.raises(fn, what, ...)
  local ok, err = pcall(fn)
  if ok then return report(false, what .. ": no error raised") end
  err = tostring(err)
  for _, frag in ipairs({ ... }) do
    if not err:find(frag, 1, true) then
      return report(false, string.format("%s: error %q lacks %q", what, err, frag))
    end
  end
  report(true)
end

function M.done()
  print(string.format("%d passed, %d failed", M.passed, M.failed))
  collectgarbage("collect")
  os.exit(M.failed == 0 and 0 or 1, true) -- true: close the state, run every __gc
end

return M

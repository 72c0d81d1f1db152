"""Functions a worker process runs in the CPU tests of the worker (crash containment)."""

import os
import time


def answer(job):
    return {"library": job.library}


def hang(job):
    time.sleep(3600)


def abort(job):
    os.abort()


def exit_silently(job):
    os._exit(3)


def illegal(job):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def misaligned(job):
    raise RuntimeError("CUDA error: misaligned address")


def trap(job):
    raise RuntimeError("CUDA error: unspecified launch failure")

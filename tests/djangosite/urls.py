from __future__ import annotations

from django.urls import path

from djangosite import views

urlpatterns = [
    path("", views.state),
    path("put", views.put),
    path("login", views.login),
    path("logout", views.logout),
]

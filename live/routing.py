from django.urls import path

from live.consumers import AgencyConsumer, ExecutionConsumer

websocket_urlpatterns = [
    path("ws/executions/<str:execution_id>/", ExecutionConsumer.as_asgi()),
    path("ws/agency/", AgencyConsumer.as_asgi()),
]
